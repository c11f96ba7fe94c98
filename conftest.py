"""Root conftest. The harness's pytest plugins (cluster session and fixtures; reporting: Allure
labels, failure evidence, run summary) are registered by the installed package's `pytest11`
entry point (karpenter_e2e.fixtures.pytest_plugin), as in any project that installs it."""
