"""check's writes to the API server: a refusal of the document is bad input at once; the API
server's load (429, 5xx, a dropped connection) is ridden out as a wait's "not yet", and if it
lasts, it is the cluster's (no verdict), never bad input."""

import pytest
from kubernetes.client.rest import ApiException

from karpenter_e2e.checks import apply
from karpenter_e2e.clusters.api.waits import Timeouts, transient
from karpenter_e2e.clusters.errors import ClusterError


def failing(*statuses):
    """A write that fails with each status in turn, then succeeds; counts its calls."""
    calls = []

    def write():
        calls.append(1)
        if len(calls) <= len(statuses):
            raise ApiException(status=statuses[len(calls) - 1], reason="test")
    return write, calls


def test_the_api_servers_load_is_ridden_out_and_the_write_goes_through():
    write, calls = failing(429, 503, 500)
    apply.sent("NodePool default", write)
    assert len(calls) == 4


@pytest.mark.parametrize("status", [400, 404, 409, 422])
def test_a_refusal_of_the_document_is_raised_at_once(status):
    write, calls = failing(status)
    with pytest.raises(ApiException) as got:
        apply.sent("NodePool default", write)
    assert got.value.status == status and len(calls) == 1


def test_a_500_about_the_document_is_an_answer_not_load():
    """The API server answers a server-side apply it cannot type against the schema with a
    500 (as seen in make test: "failed to create typed patch object ... field not declared in
    schema"); it is the manifest's error, raised at once."""
    calls = []
    typed = ApiException(status=500, reason="Internal Server Error")
    typed.body = ('{"kind":"Status","message":"failed to create typed patch object '
                  '(/default; karpenter.sh/v1, Kind=NodePool): .spec.template.spec.expireAfterr: '
                  'field not declared in schema","code":500}')

    def typed_write():
        calls.append(1)
        raise typed
    with pytest.raises(ApiException):
        apply.sent("NodePool default", typed_write)
    assert len(calls) == 1


def test_load_that_lasts_the_api_deadline_is_the_clusters_not_bad_input(monkeypatch):
    monkeypatch.setattr(apply, "DEFAULTS", Timeouts(api=1.2))
    write, calls = failing(*[503] * 100)
    with pytest.raises(ClusterError, match="did not take NodePool default for 1s"):
        apply.sent("NodePool default", write)
    assert 2 <= len(calls) <= 4


def test_a_writes_404_and_409_are_answers_and_a_reads_are_moments():
    for status in (404, 409):
        assert transient(ApiException(status=status)) and \
            not transient(ApiException(status=status), writing=True)
    assert transient(ApiException(status=503), writing=True)
    assert transient(ApiException(status=429), writing=True)
