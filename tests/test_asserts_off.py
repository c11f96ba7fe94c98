"""--karpenter-asserts=off: a scenario's own failed assert is set aside for the oracles to
judge alone; nothing else is (fixtures/judging.py _set_aside)."""

from types import SimpleNamespace

import pytest

from karpenter_e2e.clusters.api.waits import ConsistencyViolated, WaitAborted, WaitTimeout
from karpenter_e2e.fixtures import judging


def item(asserts):
    config = SimpleNamespace(getoption=lambda name: {judging.ASSERTS_OPTION: asserts}[name])
    return SimpleNamespace(config=config, nodeid="suites/x.py::test_y", user_properties=[])


@pytest.mark.parametrize("exc", [AssertionError("3 NodeClaims, expected 2"),
                                 WaitTimeout("the daemon Running", "Pending", 60.0),
                                 ConsistencyViolated("no NodeClaim added", "c3 created", 4.0)])
def test_an_own_assert_is_set_aside_only_with_asserts_off(exc):
    off = item("off")
    assert judging._set_aside(off, exc)
    assert off.user_properties[0][0] == "own assert set aside"
    assert not judging._set_aside(item("on"), exc)


@pytest.mark.parametrize("exc", [WaitAborted("pods Running", "Karpenter is not running", 3.0),
                                 judging.OraclesFailed("Karpenter broke daemons-fit"),
                                 TypeError("a harness bug"), KeyboardInterrupt()])
def test_a_harness_error_a_stopped_karpenter_and_an_oracle_are_never_set_aside(exc):
    assert not judging._set_aside(item("off"), exc)
