"""The node-packing picture of check's report: its data preparation (grouping, order, Pending
pods, prices) and its drawing, from hand-made snapshots; no cluster."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from karpenter_e2e.checks import diff, report
from karpenter_e2e.checks.observe import NodeView, PodView, PoolView, Snapshot
from karpenter_e2e.rendering import charts, packing_chart
from karpenter_e2e.rendering.packing_chart import prepare

CHECK_JSON = Path(__file__).parent / "data" / "packing-check.json"
WEB, API, JOB = "Deployment/shop/web", "Deployment/shop/api", "Job/shop/nightly"
LOGS, INFER = "DaemonSet/shop/log-agent", "Deployment/shop/infer"


def node(name, pool, itype, ct, zone, price, cpu, created, claim=None) -> NodeView:
    return NodeView(name, pool, itype, ct, zone, price,
                    {"karpenter.sh/nodepool": pool, "karpenter.sh/capacity-type": ct},
                    created, {"cpu": cpu, "memory": "15Gi", "pods": "58"},
                    name if claim is None else claim)


def pod(name, workload, node_name="", cpu="1", phase="", memory="1Gi") -> PodView:
    return PodView("shop", name, workload, phase or ("Running" if node_name else "Pending"),
                   node_name, {"cpu": cpu, "memory": memory})


def shop() -> Snapshot:
    """Two pools: `default` with an on-demand node and two spot nodes (the second spot node
    launched first), `gpu` with a busy node and an empty one; a pool `arm` with no node; a
    log-agent DaemonSet on the CPU nodes; web, api and a Job's pod; one web and one infer pod
    Pending."""
    nodes = [node("default-od7kq", "default", "c6a.2xlarge", "on-demand", "us-west-2b", 0.306,
                  "7910m", 20.0),
             node("default-sp2mx", "default", "c6a.xlarge", "spot", "us-west-2c", 0.0512,
                  "3920m", 22.0),
             node("default-sp1ab", "default", "m6i.large", "spot", "us-west-2a", 0.0336,
                  "1930m", 15.0),
             node("gpu-x4r2d", "gpu", "g5.xlarge", "on-demand", "us-west-2a", 1.006, "3920m",
                  30.0),
             node("gpu-empty", "gpu", "g5.xlarge", "on-demand", "us-west-2d", 1.006, "3920m",
                  31.0)]
    pods = [pod("web-1", WEB, "default-od7kq"), pod("web-2", WEB, "default-od7kq"),
            pod("api-1", API, "default-od7kq", "2500m"),
            pod("logs-a", LOGS, "default-od7kq", "100m"),
            pod("web-3", WEB, "default-sp2mx"), pod("web-4", WEB, "default-sp2mx", "500m"),
            pod("logs-b", LOGS, "default-sp2mx", "100m"),
            pod("nightly-x", JOB, "default-sp1ab", "1500m"),
            pod("logs-c", LOGS, "default-sp1ab", "100m"),
            pod("infer-1", INFER, "gpu-x4r2d", "3"),
            pod("done-1", JOB, "default-sp1ab", "1", phase="Succeeded"),  # holds nothing
            pod("web-5", WEB), pod("infer-2", INFER, cpu="3")]
    return Snapshot(100.0, pods, nodes, [PoolView("arm"), PoolView("default"), PoolView("gpu")])


def result_of(snap: Snapshot, mode="local") -> dict:
    return {"folder": "shop", "run_id": "check-example", "mode": mode,
            "karpenter_version": "v1.15.0", "snapshot": snap.to_dict(),
            "price_sources": report.price_sources(mode)}


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


# ---- the data -------------------------------------------------------------------------------
def test_groups_by_pool_then_capacity_type_and_bars_in_launch_order():
    p = prepare(shop().to_dict())
    assert [(g.nodepool, g.capacity_type) for g in p.groups] == [
        ("default", "on-demand"), ("default", "spot"), ("gpu", "on-demand")]
    assert [[b.name for b in g.bars] for g in p.groups] == [
        ["default-od7kq"], ["default-sp1ab", "default-sp2mx"], ["gpu-x4r2d", "gpu-empty"]]
    assert p.empty_pools == ["arm"]


def test_segments_daemonset_first_then_largest_request_first():
    bars = {b.name: b for b in prepare(shop().to_dict()).bars}
    assert [(s.workload, s.amount) for s in bars["default-od7kq"].segments] == [
        (LOGS, 0.1), (API, 2.5), (WEB, 1.0), (WEB, 1.0)]
    assert bars["default-od7kq"].segments[0].daemonset
    assert not any(s.daemonset for s in bars["default-od7kq"].segments[1:])
    assert bars["default-od7kq"].allocatable == pytest.approx(7.91)
    assert bars["default-od7kq"].used == pytest.approx(4.6)
    # A Succeeded pod no longer holds its request; the empty node has no segment at all.
    assert [s.pod for s in bars["default-sp1ab"].segments] == ["shop/logs-c", "shop/nightly-x"]
    assert bars["gpu-empty"].segments == [] and bars["gpu-empty"].used == 0


def test_pending_pods_are_counted_per_workload_most_first():
    snap = shop()
    snap.pods.append(pod("web-6", WEB))
    p = prepare(snap.to_dict())
    assert [(x.workload, x.pods, x.amount) for x in p.pending] == [(WEB, 2, 2.0),
                                                                  (INFER, 1, 3.0)]
    assert p.workloads == sorted({LOGS, WEB, API, JOB, INFER})
    assert p.daemonsets == [LOGS]


def test_prices_say_where_they_came_from_and_spot_is_modelled():
    p = prepare(shop().to_dict(), prices=report.price_sources("local"))
    tags = {b.capacity_type: b.price_tag for b in p.bars}
    assert tags == {"on-demand": "list price", "spot": "modelled"}
    assert any(n.startswith("spot: modelled, 30%-45% of on-demand") for n in p.price_notes)
    assert p.cost_per_hour == pytest.approx(0.306 + 0.0512 + 0.0336 + 2 * 1.006)
    sim = report.price_sources("aws-sim")
    assert sim["spot"][0] == "modelled" and "35%" in sim["spot"][1]
    # A mode that sets no price label of its own: the label, no claim about where from.
    assert {b.price_tag for b in prepare(shop().to_dict()).bars} == {"from its label"}


def test_another_resource_and_its_unit():
    p = prepare(shop().to_dict(), "memory")
    assert p.unit == "GiB" and p.bars[0].allocatable == 15.0
    assert p.bars[0].used == pytest.approx(4.0)
    pods = prepare(shop().to_dict(), "pods")
    assert pods.bars[0].allocatable == 58.0 and pods.bars[0].used == 4.0


def test_nodes_of_other_pools_and_their_pods_are_counted_not_drawn():
    snap = shop()
    snap.nodes.append(node("other-1", "not-ours", "c6a.large", "on-demand", "us-west-2a", 0.07,
                           "1930m", 1.0))
    snap.pods.append(pod("stray", WEB, "other-1"))
    p = prepare(snap.to_dict())
    assert "other-1" not in {b.node for b in p.bars} and p.elsewhere == 1


def test_an_old_snapshot_without_allocatable_or_claims_still_prepares():
    d = shop().to_dict()
    for n in d["nodes"]:
        del n["allocatable"], n["claim"]
    again = Snapshot.from_dict(d)  # the recorded check.json of before
    p = prepare(again.to_dict())
    assert all(b.allocatable is None for b in p.bars) and p.bars[0].used == pytest.approx(4.6)


def test_the_claim_names_the_bar_and_long_names_are_cut():
    snap = shop()
    snap.nodes[0].claim = "default-a-very-long-nodeclaim-name-indeed"
    snap.nodes[1].claim = ""  # no NodeClaim names it: the node's own name
    bars = {b.node: b for b in prepare(snap.to_dict()).bars}
    assert bars["default-od7kq"].name == "…g-nodeclaim-name-indeed"
    assert len(bars["default-od7kq"].name) == packing_chart.NAME_CHARS
    assert bars["default-sp2mx"].name == "default-sp2mx"


def fifty_nodes() -> Snapshot:
    nodes, pods = [], []
    for i in range(50):
        pool = ("web", "batch", "gpu")[i % 3]
        ct = "spot" if i % 4 else "on-demand"
        nodes.append(node(f"{pool}-n{i:02d}", pool, "c6a.2xlarge", ct, f"us-west-2{'abc'[i % 3]}",
                          0.1 + i / 1000, "7910m", float(i)))
        pods += [pod(f"w{i}-{j}", f"Deployment/shop/app-{(i + j) % 23}", f"{pool}-n{i:02d}",
                     f"{250 * (j + 1)}m") for j in range(i % 5)]
    return Snapshot(0.0, pods, nodes, [PoolView(p) for p in ("web", "batch", "gpu")])


def test_fifty_nodes_are_all_drawn_and_more_than_the_cap_are_counted():
    p = prepare(fifty_nodes().to_dict())
    assert len(p.bars) == 50 and sum(g.hidden for g in p.groups) == 0
    capped = prepare(fifty_nodes().to_dict(), max_bars=20)
    assert len(capped.bars) <= 20 and sum(g.nodes for g in capped.groups) == 50
    assert all(g.bars for g in capped.groups)


class FakeKube:
    """What observe.take asks of the cluster when the folder has no namespace of its own: the
    nodes, the NodePools and the NodeClaims."""

    def __init__(self, nodes, claims):
        self._nodes, self._claims = nodes, claims

    def nodes(self, selector=""):
        return self._nodes

    def list(self, kind, selector="", namespace=None):
        return self._claims if kind.plural == "nodeclaims" else []


def test_the_snapshot_records_allocatable_and_the_nodeclaim_of_each_node():
    import datetime as dt

    from kubernetes import client

    from karpenter_e2e.checks import observe
    from karpenter_e2e.checks.manifests import Bundle
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    kwok = client.V1Node(
        metadata=client.V1ObjectMeta(name="kwok-default-abcde-x1-42", creation_timestamp=at,
                                     labels={"karpenter.sh/nodepool": "default"}),
        status=client.V1NodeStatus(allocatable={"cpu": "3920m", "memory": "14Gi"}))
    bare = client.V1Node(metadata=client.V1ObjectMeta(name="n2", creation_timestamp=at,
                                                      labels={"karpenter.sh/nodepool": "x"}))
    claims = [{"metadata": {"name": "default-abcde"},
               "status": {"nodeName": "kwok-default-abcde-x1-42",
                          "conditions": [{"type": "Initialized", "status": "True"}]}}]
    snap = observe.take(FakeKube([kwok, bare], claims), Bundle(Path("f")))
    assert [(n.name, n.claim, n.allocatable) for n in snap.nodes] == [
        ("kwok-default-abcde-x1-42", "default-abcde", {"cpu": "3920m", "memory": "14Gi"}),
        ("n2", "", {})]
    assert prepare(snap.to_dict()).bars[0].name == "default-abcde"


# ---- the picture ----------------------------------------------------------------------------
def test_the_picture_is_written_with_labels_headings_legend_and_pending(tmp_path):
    drawn: dict = {}
    path = packing_chart.render_result(result_of(shop()), tmp_path / "packing.png",
                                       inspect=drawn)
    width, height = png_size(path)
    assert width >= 900 and height >= 400 and path.stat().st_size < 200_000
    assert drawn["headings"][0].startswith("NodePool default · on-demand · 1 node · $0.3060/h")
    assert len(drawn["rows"]) == 5
    assert "$0.0512/h modelled" in drawn["rows"][2] and "us-west-2c" in drawn["rows"][2]
    assert "c6a.xlarge" in drawn["rows"][2] and "spot" in drawn["rows"][2]
    assert "log-agent (DaemonSet, shop) ×3" in drawn["legend"]
    assert "unused allocatable" in drawn["legend"]
    assert drawn["notes"][0] == "Pending, on no node: 2 pods"
    assert "    web (Deployment, shop): 1 pod, 1 CPU requested" in drawn["notes"]
    assert "NodePools with no node: arm" in drawn["notes"]
    assert any(n.startswith("Prices per hour") and "modelled" in n for n in drawn["notes"])


def test_one_empty_node_and_no_node_at_all_are_drawn(tmp_path):
    one = Snapshot(0.0, [pod("web-1", WEB)],
                   [node("default-1", "default", "c6a.large", "spot", "us-west-2a", 0.03,
                         "1930m", 0.0)], [PoolView("default")])
    drawn: dict = {}
    png_size(packing_chart.render_result(result_of(one), tmp_path / "one.png", inspect=drawn))
    assert len(drawn["rows"]) == 1 and drawn["segments"] == []
    none = Snapshot(0.0, [pod("web-1", WEB)], [], [PoolView("default")])
    drawn = {}
    png_size(packing_chart.render_result(result_of(none), tmp_path / "none.png", inspect=drawn))
    assert drawn["rows"] == [] and drawn["notes"][0] == "Pending, on no node: 1 pod"


def test_fifty_nodes_make_a_taller_picture_not_a_denser_one(tmp_path):
    _, small = png_size(packing_chart.render_result(result_of(shop()), tmp_path / "s.png"))
    drawn: dict = {}
    _, tall = png_size(packing_chart.render_result(result_of(fifty_nodes()), tmp_path / "t.png",
                                                   inspect=drawn))
    assert len(drawn["rows"]) == 50 and tall > 50 * packing_chart.ROW_IN * 80
    assert tall > 2 * small
    assert "+7 more workloads (colours repeat)" in drawn["legend"]


def test_redrawn_from_a_check_json_on_the_command_line(tmp_path):
    """tests/data/packing-check.json is shop() as check.json holds it; docs/pictures/
    packing-example.png is drawn from it (karpenter-e2e chart packing
    tests/data/packing-check.json docs/pictures/packing-example.png)."""
    recorded = json.loads(CHECK_JSON.read_text())
    assert recorded == json.loads(json.dumps(result_of(shop())))
    assert charts.main(["packing", str(CHECK_JSON), str(tmp_path / "p.png")]) == 0
    png_size(tmp_path / "p.png")
    (tmp_path / "sim.json").write_text(json.dumps(result_of(shop(), "aws-sim")))
    assert charts.main(["packing", str(tmp_path / "sim.json"), str(tmp_path / "m.png"),
                        "memory"]) == 0
    png_size(tmp_path / "m.png")
    assert charts.main(["packing", str(tmp_path / "none.json"), str(tmp_path / "n.png")]) == 2
    with pytest.raises(SystemExit) as exc:
        charts.main(["packing"])
    assert exc.value.code == 2


# ---- where check puts it ----------------------------------------------------------------------
def test_check_md_shows_the_picture_and_allure_attaches_it(tmp_path):
    snap = shop()
    result = {**result_of(snap), "cluster": "c", "scale": {}, "settled": True,
              "settle_error": "", "scale_out": report.summarise(snap), "scale_in_result": None,
              "expectations": [], "timings": {}, "passed": True, "started": 1.0,
              "finished": 2.0, "files": {}}
    png = packing_chart.render_result(result, tmp_path / "packing.png")
    result["files"] = {"packing": str(png), "timeline": str(tmp_path / "timeline.png")}
    report.write(result, tmp_path)
    md = (tmp_path / "check.md").read_text()
    assert "![node packing after scale-out](packing.png)" in md
    assert "![timeline](timeline.png)" in md
    assert "packing.png" not in report.tables(result)  # the printed text: no picture to show
    report.write_allure(result, tmp_path / "allure", None, png)
    results = [json.loads(f.read_text()) for f in (tmp_path / "allure").glob("*-result.json")]
    names = [a["name"] for r in results for a in r.get("attachments", [])]
    assert "node packing" in names and "timeline" not in names


def test_with_base_the_comparison_names_both_sides_pictures():
    base, head = result_of(shop()), result_of(shop())
    for side, name in ((base, "base"), (head, "head")):
        side.update(passed=True, settled=True, expectations=[], folder=name,
                    run_id=f"check-{name}",
                    files={"packing": f"reports/runs/check-{name}/packing.png"})
    text = diff.markdown(diff.summary(base, head, "folder `base`"))
    assert "Node packing: base `check-base/packing.png`, head `check-head/packing.png`" in text
