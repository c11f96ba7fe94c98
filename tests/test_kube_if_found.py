"""clusters.api.kube.if_found: the one rule for a 404 (get-or-None, delete-if-there). No cluster."""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException
from kubernetes.dynamic.exceptions import DynamicApiError

from karpenter_e2e.clusters.api.kube import if_found


def test_if_found_is_the_one_404_rule():
    def raising(exc):
        def call():
            raise exc
        return call

    assert if_found(lambda: 3) == 3
    assert if_found(raising(ApiException(status=404))) is None
    assert if_found(raising(ApiException(status=404)), []) == []
    gone = DynamicApiError(ApiException(status=404))
    assert if_found(raising(gone), "none") == "none"
    with pytest.raises(ApiException):
        if_found(raising(ApiException(status=403)))
