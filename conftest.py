"""Root conftest: registers the harness's pytest plugins (cluster session and fixtures;
reporting: Allure labels, failure evidence, run summary)."""

pytest_plugins = ["karpenter_e2e.fixtures.reporting", "karpenter_e2e.fixtures.plugin", "karpenter_e2e.fixtures.outcomes"]
