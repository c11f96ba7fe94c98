"""The preflight fails fast, naming it, when a cluster component has exited."""

from types import SimpleNamespace

import pytest

from karpenter_e2e.clusters.base import Status
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.fixtures.plugin import _preflight


class FakeKube:
    core = SimpleNamespace(get_api_resources=lambda **_: None)

    def crd_established(self, name: str) -> bool:
        return True


def backend(components: dict[str, bool]):
    return SimpleNamespace(karpenter_running=lambda: True,
                           status=lambda: Status(all(components.values()), "detail", components))


def test_a_dead_control_plane_component_stops_the_run_with_its_name():
    # Seen under load: kube-controller-manager exited ("leaderelection lost") while the API
    # kept answering, so no Deployment got pods and scenarios timed out as if Karpenter failed.
    with pytest.raises(ClusterError, match="kube-controller-manager"):
        _preflight(FakeKube(), backend({"kube-apiserver": True, "kube-controller-manager": False,
                                        "karpenter": True}))


def test_a_whole_cluster_passes():
    _preflight(FakeKube(), backend({"kube-apiserver": True, "kube-controller-manager": True}))
