"""Fixtures the harness's own tests share."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def provider_module() -> Path:
    """The pinned Karpenter AWS provider module in the Go module cache (downloaded from the
    module proxy the first time; never from the open internet)."""
    from clusters.eks import provider
    if not shutil.which("go"):
        pytest.skip("Go is not on PATH: the AWS provider's CRDs and sources are read from the "
                    f"Go module cache ({provider.MODULE}, go mod download)")
    return provider.module_dir()


@pytest.fixture
def fake_aws(monkeypatch):
    """moto's in-process AWS for the test's boto3 clients (dummy credentials, no network)."""
    from moto import mock_aws
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield
