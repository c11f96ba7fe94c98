"""Label keys, in one place: the discovery labels on everything the harness creates (how each
test, fixtures/isolation.py, and the sweeper, clusters/eks/sweep.py, find a run's and a test's
objects), and the well-known keys Karpenter, its providers and Kubernetes put on nodes."""

RUN_LABEL = "karpenter-e2e/run"
TEST_LABEL = "karpenter-e2e/test"
MANAGED_BY = {"app.kubernetes.io/managed-by": "karpenter-e2e"}
# An annotation on a NodePool's template (so on its NodeClaims and nodes): seconds from a
# node's creation to its Ready, which local mode's simulated nodes take (clusters/local/stages.py)
LAUNCH_LATENCY = "karpenter-e2e/launch-latency"

# Karpenter's own (sigs.k8s.io/karpenter pkg/apis/v1/labels.go)
NODEPOOL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"  # an annotation, on pods and nodes
REGISTERED = "karpenter.sh/registered"  # on a node once Karpenter registered it
# On a NodeClaim: "true" when MIN_VALUES_POLICY BestEffort relaxed a minValues for it
MIN_VALUES_RELAXED = "karpenter.sh/nodeclaim-min-values-relaxed"

# Kubernetes' well-known labels, and the ReplicaSet's scale-in ranking annotation (on pods:
# the lowest cost goes first)
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
ARCH = "kubernetes.io/arch"
HOSTNAME = "kubernetes.io/hostname"

# The AWS provider's instance labels (the local catalogue puts the same ones on its offerings)
AWS = "karpenter.k8s.aws"
CATEGORY = f"{AWS}/instance-category"
FAMILY = f"{AWS}/instance-family"
GENERATION = f"{AWS}/instance-generation"
CPUS = f"{AWS}/instance-cpu"
GPU_COUNT = f"{AWS}/instance-gpu-count"
GPU_NAME = f"{AWS}/instance-gpu-name"
GPU_MANUFACTURER = f"{AWS}/instance-gpu-manufacturer"

# The hourly price on each node, set by the KWOK provider (and by aws-sim's registrar); the
# AWS provider sets none on a real cluster (clusters/karpenter/prices.py reads its /metrics)
PRICE = "eks-node-viewer/instance-price"
