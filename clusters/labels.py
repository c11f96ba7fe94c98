"""Discovery labels on everything the harness creates: how each test (fixtures/isolation.py)
and the sweeper (clusters/eks/sweep.py) find a run's and a test's objects."""

RUN_LABEL = "karpenter-e2e/run"
TEST_LABEL = "karpenter-e2e/test"
MANAGED_BY = {"app.kubernetes.io/managed-by": "karpenter-e2e"}
