"""Root conftest: registers the harness's pytest plugins (cluster session and fixtures;
reporting: Allure labels, failure evidence, run summary)."""

pytest_plugins = ["fixtures.reporting", "fixtures.plugin", "fixtures.outcomes"]
