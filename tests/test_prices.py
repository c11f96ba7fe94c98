"""A node's price, one policy in every mode (clusters/karpenter/prices.py): the provider's
label where it sets one (KWOK, aws-sim's registrar), else Karpenter's own estimate for the
node's offering from its /metrics (the AWS provider on a real cluster labels none), else
unknown: an assert's harness error, a report's –."""

from __future__ import annotations

import inspect
import time
from pathlib import Path

import pytest
from kubernetes import client

from karpenter_e2e.clusters.api.labels import CAPACITY_TYPE, INSTANCE_TYPE, PRICE, ZONE
from karpenter_e2e.clusters.api.waits import Timeouts
from karpenter_e2e.clusters.karpenter import incluster, prices
from karpenter_e2e.clusters.karpenter.incluster import Deployment
from karpenter_e2e.clusters.karpenter.prices import METRIC, Prices, PriceUnknown
from karpenter_e2e.clusters.karpenter.promtext import MetricsFormatError, series_labels
from karpenter_e2e.fixtures import expect as expect_mod
from karpenter_e2e.fixtures.expect import Expect
from karpenter_e2e.fixtures.ledger import NodeLedger
from karpenter_e2e.fixtures.timeline import Recording

# A /metrics page in client_golang's text format for the AWS provider v1.15.0: the gauges of
# pkg/controllers/metrics/metrics.go with their HELP text, label names sorted, beside the
# offering_available gauge of the same labels and a process figure. The on-demand prices are
# the provider's static table (us-east-1: c6i.large 0.085, m5.large 0.096). Written here from
# the source (no Karpenter could run for it), not captured from a running controller.
PAGE = (Path(__file__).parent / "data" / "aws-provider-v1.15.0-offering-prices.metrics").read_text()


def labels(itype="c6i.large", capacity="on-demand", zone="us-east-1a", price=None) -> dict:
    out = {INSTANCE_TYPE: itype, CAPACITY_TYPE: capacity, ZONE: zone}
    return {**out, PRICE: price} if price is not None else out


class Page:
    """Karpenter's /metrics as a backend's karpenter_metrics(): the pages in turn, then the
    last one; counts the reads."""

    def __init__(self, *pages: str | None):
        self.pages, self.reads = list(pages), 0

    def __call__(self) -> str | None:
        self.reads += 1
        return self.pages[min(self.reads, len(self.pages)) - 1]


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ---- the page ------------------------------------------------------------------------------
def test_the_offering_prices_are_read_by_the_gauges_true_name_and_labels():
    table = prices.offering_prices(PAGE)
    assert table == {("c6i.large", "on-demand", "us-east-1a"): 0.085,
                     ("c6i.large", "on-demand", "us-east-1b"): 0.085,
                     ("c6i.large", "spot", "us-east-1b"): 0.0341,
                     ("m5.large", "on-demand", "us-east-1a"): 0.096,
                     ("m5.large", "reserved", "us-east-1a"): 0.0}
    assert METRIC == "karpenter_cloudprovider_instance_type_offering_price_estimate"
    # The KWOK provider publishes no such gauge (it is the AWS provider's): in local and kind
    # mode the label is the only price. A real page of karpenter-kwok v1.14.3:
    kwok = (Path(__file__).parent / "data" / "karpenter-metrics-v1.14.3.txt").read_text()
    assert prices.offering_prices(kwok) == {}


def test_series_labels_unescape_and_refuse_what_is_not_the_format():
    assert series_labels('m{a="x \\"y\\"",b="1\\\\2\\n"}') == ("m", {"a": 'x "y"', "b": "1\\2\n"})
    assert series_labels("up") == ("up", {})
    with pytest.raises(MetricsFormatError, match="labels at"):
        series_labels('m{a=x}')


# ---- the policy ----------------------------------------------------------------------------
def test_a_node_without_the_label_gets_karpenters_estimate_for_its_offering():
    page = Page(PAGE)
    p = Prices(page)
    assert p.of(labels("c6i.large", "spot", "us-east-1b")) == 0.0341
    assert p.of(labels("m5.large", "on-demand", "us-east-1a")) == 0.096
    assert page.reads == 1  # one page for both


def test_the_label_wins_where_the_provider_set_one():
    """The label is the node's own price from its provider's offerings (the KWOK catalogue is
    both); the gauge is per offering, the last NodePool's, overlays applied. Where a node has
    a label, /metrics is not even read."""
    page = Page(PAGE)
    assert Prices(page).of(labels("c6i.large", "on-demand", "us-east-1a", price="0.1")) == 0.1
    assert page.reads == 0


def test_a_missing_offering_reads_the_page_again_at_most_every_reread_s():
    clock, page = Clock(), Page(PAGE.replace('instance_type="m5.large"', 'instance_type="m5.xl"'),
                                PAGE)
    p, node = Prices(page, clock), labels("m5.large")
    assert p.of(node) is None
    clock.now += prices.REREAD_S - 0.1
    assert p.of(node) is None and page.reads == 1
    clock.now += 0.1
    assert p.of(node) == 0.096 and page.reads == 2


def test_no_price_is_none_and_says_what_is_missing():
    node = labels("c6i.xlarge", "spot", "us-east-1c")
    cases = {
        "no offering labels": (Prices(Page(PAGE)), {INSTANCE_TYPE: "c6i.large"},
                               f"no {PRICE} label (Karpenter's provider sets none here), and no "
                               f"{CAPACITY_TYPE}, {ZONE} label to look its offering up by"),
        "no page in this mode": (Prices(None), node, "this mode has no Karpenter /metrics page"),
        "page does not answer": (Prices(Page(None)), node,
                                 "Karpenter's /metrics page did not answer"),
        "no such series": (Prices(Page(PAGE)), node,
                           f'Karpenter\'s /metrics has no {METRIC}{{instance_type="c6i.xlarge",'
                           f'capacity_type="spot",zone="us-east-1c"}} (5 offerings priced there)'),
    }
    for case, (p, node_labels, said) in cases.items():
        assert p.of(node_labels) is None, case
        assert said in p.missing(node_labels), case


def test_a_total_with_one_unknown_price_is_none_not_a_partial_sum():
    p = Prices(Page(PAGE))
    assert p.total([labels("c6i.large"), labels("m5.large")]) == pytest.approx(0.181)
    assert p.total([labels("c6i.large"), labels("m5.large", zone="us-east-1c")]) is None


# ---- an assert's price: Expect.price ---------------------------------------------------------
def node(name: str, node_labels: dict) -> client.V1Node:
    return client.V1Node(metadata=client.V1ObjectMeta(name=name, labels=node_labels))


def make_expect(p: Prices) -> Expect:
    return Expect(None, diagnose=lambda: "", timeouts=Timeouts(poll=0.01), prices=p)


def test_an_assert_gets_the_label_or_the_estimate():
    e = make_expect(Prices(Page(PAGE)))
    assert e.price(node("a", labels("m5.large", price="0.0961"))) == 0.0961
    assert e.price(node("b", labels("c6i.large", "spot", "us-east-1b"))) == 0.0341


def test_an_assert_without_any_price_is_a_harness_error_at_once():
    started = time.monotonic()
    with pytest.raises(PriceUnknown, match="node n has no price: .*did not answer") as err:
        make_expect(Prices(Page(None))).price(node("n", labels()))
    assert not isinstance(err.value, AssertionError)  # outcomes.kind_of: 'error', not a kill
    assert time.monotonic() - started < 1  # no wait: nothing waiting could give


def test_an_assert_waits_a_round_of_the_metrics_controller_for_an_offering_then_fails(monkeypatch):
    monkeypatch.setattr(expect_mod, "PRICE_PUBLISH_S", 0.5)
    clock = Clock()
    without = PAGE.replace('instance_type="m5.large"', 'instance_type="m5.xl"')
    late = Page(without, without, PAGE)

    def ticking() -> float:  # each look is a re-read's interval later
        clock.now += prices.REREAD_S
        return clock.now

    assert make_expect(Prices(late, ticking)).price(node("n", labels("m5.large"))) == 0.096
    assert late.reads == 3
    with pytest.raises(PriceUnknown, match=r'has no .*instance_type="m5.large"'):
        make_expect(Prices(Page(without), ticking)).price(node("n", labels("m5.large")))


# ---- the reports: the ledger, the timeline ----------------------------------------------------
def test_the_ledger_prices_a_node_by_the_estimate_and_records_no_cost_without_one():
    def summary(p: Prices) -> dict:
        ledger = NodeLedger(None, "t=1", p)
        n = node("n", labels("c6i.large"))
        n.metadata.creation_timestamp = None
        ledger._record("ADDED", n)
        return ledger.summary()

    assert "cost_usd" in summary(Prices(Page(PAGE)))
    assert "cost_usd" not in summary(Prices(Page(None)))  # the summary prints –


def test_the_timeline_records_the_estimate_and_where_it_came_from():
    rec = Recording("abc123", 0.0)
    rec.prices = Prices(Page(PAGE))
    body = {"metadata": {"name": "n", "labels": labels("c6i.large", "spot", "us-east-1b"),
                         "creationTimestamp": "2026-12-07T15:00:00Z"}}
    rec.observe("nodes", "ADDED", body, now=1.0)
    body["metadata"]["labels"] = labels(price="0.1")
    rec.observe("nodes", "MODIFIED", body, now=2.0)
    items = [item for _, _, _, item in rec.log]
    assert (items[0]["price"], items[0]["price_from"]) == ("0.0341", "metric")
    assert items[1]["price"] == "0.1" and "price_from" not in items[1]


# ---- eks mode reads the page as kind mode does ------------------------------------------------
def test_the_page_is_read_through_the_api_servers_proxy_to_the_charts_service():
    """The AWS provider's chart (charts/karpenter/templates/service.yaml at v1.15.0 and
    v1.15.2) names the Service karpenter.fullname, as the Deployment, port http-metrics."""
    asked = []

    class Core:
        def connect_get_namespaced_service_proxy_with_path(self, name, namespace, path, **kwargs):
            asked.append((name, namespace, path))
            return PAGE

    class Kube:
        core = Core()

    d = Deployment("karpenter", "karpenter", "public.ecr.aws/karpenter/controller:1.15.2", 1, 1)
    assert incluster.metrics(Kube(), d) == PAGE  # type: ignore[arg-type]
    assert asked == [("karpenter:http-metrics", "karpenter", "metrics")]


def test_the_proxy_call_matches_the_installed_kubernetes_client():
    """The fake above stands in for the client: the installed client must take the same call
    (ApiClient.call_api's signature changed under the harness once, unseen by a fake)."""
    params = inspect.signature(client.CoreV1Api.connect_get_namespaced_service_proxy_with_path)
    assert list(params.parameters)[1:4] == ["name", "namespace", "path"]
    assert "_request_timeout" in params.parameters or any(
        p.kind is p.VAR_KEYWORD for p in params.parameters.values())
