"""The replay's bodies, from a snapshot's objects: NodeClaims pinned to where their nodes ran,
pods bound by nodeName with pause images, owners that adopt rather than roll, the
verification table."""

from karpenter_e2e.checks import replay

NODECLASS = ("karpenter.kwok.sh", "v1alpha1", "KWOKNodeClass")
NODE = {"metadata": {"name": "ip-10-0-0-1", "labels": {
    "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-west-2b",
    "karpenter.sh/capacity-type": "spot", "karpenter.sh/nodepool": "default"}}}
CLAIM = {"metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default",
                                                          "team": "a"},
                      "annotations": {"karpenter.sh/nodepool-hash": "old",
                                      "karpenter.sh/nodepool-hash-version": "v1",
                                      "karpenter.sh/do-not-disrupt": "true"}},
         "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                   "name": "default"},
                  "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                    "values": ["m5.large", "c5.large"]},
                                   {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                  "startupTaints": [{"key": "agent", "effect": "NoSchedule"}],
                  "resources": {"requests": {"cpu": "1"}}},
         "status": {"nodeName": "ip-10-0-0-1"}}


def test_a_nodeclaim_is_pinned_to_its_nodes_type_zone_and_capacity_type_with_the_pools_hash():
    body = replay._claim_body(CLAIM, NODE, {"karpenter.sh/nodepool-hash": "new"}, NODECLASS)
    reqs = {r["key"]: r for r in body["spec"]["requirements"]}
    assert reqs["node.kubernetes.io/instance-type"]["values"] == ["m5.large"]
    assert reqs["topology.kubernetes.io/zone"]["values"] == ["us-west-2b"]
    assert reqs["karpenter.sh/capacity-type"]["values"] == ["spot"]
    assert reqs["kubernetes.io/arch"]["values"] == ["amd64"]  # the rest as it was
    assert body["spec"]["nodeClassRef"] == {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                            "name": "default"}
    assert "startupTaints" not in body["spec"]
    meta = body["metadata"]
    assert meta["labels"][replay.ORIGIN] == "ip-10-0-0-1" and meta["labels"]["team"] == "a"
    assert meta["annotations"] == {"karpenter.sh/do-not-disrupt": "true",
                                   "karpenter.sh/nodepool-hash": "new"}  # the pool's, not the old


def test_a_pool_is_held_while_the_state_is_rebuilt():
    pool = {"metadata": {"name": "default"}, "spec": {
        "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                               "name": "default"}}},
        "disruption": {"budgets": [{"nodes": "20%"}]}}}
    body = replay._pool_body(pool, NODECLASS)
    assert body["spec"]["disruption"]["budgets"] == replay.HELD
    assert pool["spec"]["disruption"]["budgets"] == [{"nodes": "20%"}]  # the snapshot untouched


def test_a_pod_is_bound_where_it_ran_with_a_pause_image_and_no_owner_or_volumes():
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "web-1", "namespace": "shop", "uid": "u", "labels": {"app": "web"},
                        "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f"}]},
           "spec": {"nodeName": "ip-10-0-0-1", "containers": [{"name": "app", "resources": {}}],
                    "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]},
           "status": {"phase": "Running"}}
    body = replay._pod_body(pod, "kwok-default-r-abcde-x")
    assert body["spec"]["nodeName"] == "kwok-default-r-abcde-x"
    assert body["spec"]["containers"][0]["image"] == replay.PAUSE_IMAGE
    assert "volumes" not in body["spec"] and "status" not in body
    assert "ownerReferences" not in body["metadata"] and "uid" not in body["metadata"]
    assert "nodeName" not in replay._pod_body(pod, None)["spec"]  # its node was not rebuilt


def test_a_statefulset_adopts_its_pods_and_never_rolls_them():
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "a"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "db"}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}}],
                    "template": {"spec": {"containers": [{"name": "db"}]}}}}
    body = replay._owner_body(sts)
    assert body["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert "volumeClaimTemplates" not in body["spec"] and body["spec"]["serviceName"] == "db"
    assert body["spec"]["template"]["spec"]["containers"][0]["image"] == replay.PAUSE_IMAGE


def test_the_table_says_whether_the_state_was_reproduced():
    rows = [{"node": "a", "as": "x", "nodepool": "p", "instance-type": "m5.large", "zone": "z",
             "capacity-type": "spot", "pods": 2, "placed": 2, "match": True}]
    ok = replay.Rebuilt({"a": "x"}, rows, 2, 2, [])
    assert ok.exact and "**reproduced exactly**" in replay.table(ok)
    bad = replay.Rebuilt({"a": "x"}, [{**rows[0], "placed": 1, "match": False}], 1, 2,
                         ["Deployment web: not rebuilt"])
    text = replay.table(bad)
    assert not bad.exact and "**not reproduced**" in text and "| NO |" in text
    assert "- Deployment web: not rebuilt" in text


def test_check_refuses_a_replay_it_cannot_start(tmp_path, capsys):
    from karpenter_e2e.checks import cli
    assert cli.main(["--snapshot", str(tmp_path)]) == cli.EXIT_BAD_INPUT
    assert "no snapshot.yaml there" in capsys.readouterr().err
    assert cli.main([]) == cli.EXIT_BAD_INPUT  # neither a folder nor a snapshot
    (tmp_path / "snapshot.yaml").write_text("format: 1\ncounts: {}\n")
    assert cli.main([str(tmp_path), "--snapshot", str(tmp_path)]) == cli.EXIT_BAD_INPUT
    assert "give one of: a folder of manifests, or --snapshot DIR" in capsys.readouterr().err
    assert cli.main(["--snapshot", str(tmp_path), "--window", "soon"]) == cli.EXIT_BAD_INPUT
    assert "not a Go duration" in capsys.readouterr().err


def test_a_synthetic_snapshot_at_scale_is_consistent_and_replayable(tmp_path):
    from collections import defaultdict

    from kubernetes.utils.quantity import parse_quantity

    from karpenter_e2e.checks import snapshot, synthetic
    about, objects = synthetic.make(300, 3000, seed="t")
    assert synthetic.make(300, 3000, seed="t") == (about, objects)  # the seed reproduces it
    assert len(objects["Node"]) == len(objects["NodeClaim"]) == 300
    # pods fill the nodes to 40-90 %: what finds no room is left out, and said
    assert 2700 <= len(objects["Pod"]) <= 3000
    assert f"{len(objects['Pod'])} of 3000 pods placed" in about["source"]
    nodes = {n["metadata"]["name"]: n for n in objects["Node"]}
    used = defaultdict(float)
    for p in objects["Pod"]:
        used[p["spec"]["nodeName"]] += float(parse_quantity(
            p["spec"]["containers"][0]["resources"]["requests"]["cpu"]))
    for name, cpu in used.items():  # every node holds its pods and the 100m daemon
        assert cpu + 0.1 <= float(parse_quantity(nodes[name]["status"]["allocatable"]["cpu"])), name
    assert {n["metadata"]["labels"]["karpenter.sh/capacity-type"] for n in nodes.values()} == \
        {"on-demand", "spot"}
    assert len({n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes.values()}) \
        == len(synthetic.ZONES)
    snapshot.write(objects, about, tmp_path)
    _, back = snapshot.load(tmp_path)
    for claim in back["NodeClaim"]:
        body = replay._claim_body(claim, nodes[claim["status"]["nodeName"]],
                                  {"karpenter.sh/nodepool-hash": "h"}, NODECLASS)
        assert len([r for r in body["spec"]["requirements"] if len(r["values"]) == 1]) >= 3


def test_a_pods_overhead_is_left_to_its_runtime_class_which_the_replay_makes_first():
    pod = {"metadata": {"name": "api-1", "namespace": "team"},
           "spec": {"containers": [{"name": "c", "image": "x"}], "runtimeClassName": "sandboxed",
                    "overhead": {"cpu": "250m"}}}
    kept = replay._pod_body(pod, "n1", {"sandboxed"})["spec"]
    assert kept["runtimeClassName"] == "sandboxed" and "overhead" not in kept
    lost = replay._pod_body(pod, "n1", set())["spec"]  # a snapshot taken before RuntimeClasses
    assert "runtimeClassName" not in lost and "overhead" not in lost


def test_nodes_left_alone_are_grouped_by_reason_with_the_list_folded_below():
    """At scale (a 500-node snapshot leaves some 450 alone) the reasons come first, each with
    how many nodes gave it, the objects each names aside; every node stays, folded below."""
    from karpenter_e2e.rendering import replay_window
    blocked = {f"kwok-general-{i:05d}": [f'Pod has "karpenter.sh/do-not-disrupt" annotation '
                                         f'(Pod=team-{i % 7:02d}/app-{i})']
               for i in range(300)}
    blocked |= {f"kwok-batch-{i:05d}": [
        f"Pdb prevents pod evictions (PodDisruptionBudget=[team-05/app-{i}])",
        "Node is nominated for a pending pod"] for i in range(150)}
    lines = replay_window.left_alone(blocked)
    table = lines[:lines.index("") + 6]
    assert lines[0].startswith("Left alone: 450 node(s), by the reason Karpenter gave")
    assert table[2:] == ["| nodes | reason |", "|---|---|",
                         '| 300 | Pod has "karpenter.sh/do-not-disrupt" annotation |',
                         "| 150 | Node is nominated for a pending pod |",
                         "| 150 | Pdb prevents pod evictions |"]
    folded = lines[lines.index("<details><summary>Each node left alone, and why (450)"
                               "</summary>"):]
    assert folded[-1] == "</details>" and sum(x.startswith("- kwok-") for x in folded) == 450
    assert "- kwok-batch-00007: Pdb prevents pod evictions (PodDisruptionBudget=[team-05/app-7]);" \
           " Node is nominated for a pending pod" in folded
    assert len(lines) < 470 and sum(not x.startswith("- ") for x in lines) < 15
    assert replay_window.left_alone({}) == []
