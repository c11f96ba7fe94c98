"""Root conftest: registers the harness's pytest plugin (options, cluster session, fixtures)."""

pytest_plugins = ["fixtures.plugin"]
