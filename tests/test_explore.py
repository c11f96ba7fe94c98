"""Generated workloads: the seed reproduces each case, every case is a folder `check` accepts
(validated as check validates before any cluster), and shrinking only ever simplifies."""

import json
from pathlib import Path

import pytest

from karpenter_e2e.checks import explore, report
from karpenter_e2e.checks.run import plan
from karpenter_e2e.runners import explore as runner

SEED = "test-seed"


def test_the_seed_and_index_reproduce_a_case_and_others_differ():
    assert explore.generate(SEED, 0) == explore.generate(SEED, 0)
    cases = [explore.generate(SEED, i).describe() for i in range(20)]
    assert len(set(cases)) == 20


@pytest.mark.parametrize("index", range(25))
def test_every_generated_case_is_a_folder_check_accepts(index, tmp_path):
    case = explore.generate(SEED, index)
    folder = explore.write(case, tmp_path / "case")
    p = plan(folder, None, "", "", "explore", None)  # check's own validation, offline
    kinds = sorted({m.kind for m in p.bundle.manifests})
    assert "NodePool" in kinds and "Deployment" in kinds
    # every pod selects the case's nodes, so cases on one cluster never share them
    for m in explore.manifests(case):
        if m["kind"] in ("Deployment", "DaemonSet"):
            assert m["spec"]["template"]["spec"]["nodeSelector"][explore.CASE_LABEL] == "on"


def test_the_generator_draws_from_the_whole_inventory_it_names():
    cases = [explore.generate(SEED, i) for i in range(200)]
    operators = {r["operator"] for c in cases for p in c.pools
                 for r in p.requirements + p.more_requirements}
    assert operators == {"In", "NotIn", "Gt", "Lt", "Exists", "DoesNotExist", "Gte", "Lte"}
    ws = [w for c in cases for w in c.workloads]
    for attr in ("spread", "spread_anyway", "anti_affinity", "do_not_disrupt", "pdb", "memory",
                 "tolerates", "pool", "prefer_zone", "prefer_apart", "volume_zones"):
        assert any(getattr(w, attr) for w in ws), attr
    assert any(w.scale_in == 0 for w in ws) and any(w.scale_in for w in ws)
    pools = [p for c in cases for p in c.pools]
    assert {p.policy for p in pools} == {"WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"}
    assert any(p.taint for p in pools) and any(p.cpu_limit for p in pools)
    assert any(p.weight for p in pools) and any(c.daemons for c in cases)
    assert {str(p.budgets) for p in pools} >= {"None", "[{'nodes': '0'}]", "[{'nodes': '1'}]"}
    assert {p.min_values for p in pools} == {None, 2, 3}


def test_a_volume_limits_its_workload_to_the_zones_its_class_and_pv_name():
    """The class's allowed topologies, the PV's node affinity and the description agree, the
    claim is in the case's namespace, and every pod of the workload mounts it."""
    case = next(c for c in (explore.generate(SEED, i) for i in range(100))
                if any(w.volume_zones for w in c.workloads))
    w = next(w for w in case.workloads if w.volume_zones)
    by = {(m["kind"], m["metadata"]["name"]): m for m in explore.manifests(case)}
    cls = by[("StorageClass", f"explore-{w.name}")]
    assert cls["allowedTopologies"][0]["matchLabelExpressions"][0]["values"] == list(w.volume_zones)
    pv = by[("PersistentVolume", f"explore-{w.name}")]["spec"]
    term = pv["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term["values"] == list(w.volume_zones) and pv["storageClassName"] == cls["metadata"]["name"]
    claim = by[("PersistentVolumeClaim", w.name)]
    assert claim["metadata"]["namespace"] == explore.NAMESPACE
    pod = by[("Deployment", w.name)]["spec"]["template"]["spec"]
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == w.name
    assert "volume in " in case.describe()
    # shrinking can drop the volume alone
    assert any(not s.workloads[case.workloads.index(w)].volume_zones
               for s in explore.smaller(case) if len(s.workloads) == len(case.workloads))


def test_volumes_came_without_changing_the_cases_recorded_seeds_drew():
    """Volumes are drawn from a stream of their own: a seed recorded before they existed
    (records/release-diffs-20261206.md, the nightly's v1.14.0 -> v1.14.1 case) still draws the
    pools and workloads it did then; only a volume may be added."""
    recorded = ("pool p0: arch In arm64, capacity-type In spot, instance-category In m,r, "
                "tainted, weight 50, limit 8 CPU, budgets [{'nodes': '50%', 'reasons': "
                "['Underutilized']}], WhenEmptyOrUnderutilized after 0s; pool p1: arch In arm64, "
                "capacity-type In on-demand, limit 8 CPU, WhenEmptyOrUnderutilized after 0s; "
                "w0: 6x 500m, spread hostname, PDB; w1: 5x 1/2Gi on p0, spread zone; w2: 3x "
                "250m/512Mi on p1, do-not-disrupt, scaled to 1, prefers apart; daemon d0: 250m")
    case = explore.generate("nightly-v1.14.0-v1.14.1", 0)
    for w in case.workloads:
        w.volume_zones = None
    _without_inputs(case)
    assert case.describe() == recorded


def _without_inputs(case: explore.Case) -> None:
    """``case`` as the first two streams drew it: what the inputs stream drew taken out."""
    case.pools = [p for p in case.pools if p.name not in ("s0", "b0")]
    case.workloads = [w for w in case.workloads if not w.job]
    case.daemons = [d for d in case.daemons if d.name != "d1"]
    for obj, extras in [(p, explore.POOL_EXTRAS) for p in case.pools] \
            + [(w, explore.WORKLOAD_EXTRAS) for w in case.workloads] \
            + [(d, explore.DAEMON_EXTRAS) for d in case.daemons]:
        for a in extras:
            setattr(obj, a, explore.empty_value(getattr(obj, a)))
    for p in case.pools:
        p.more_requirements = []
    case.settings, case.overlay, case.buffer = {}, None, None


@pytest.mark.parametrize("index", range(40))
def test_the_inputs_stream_only_adds_to_what_a_seed_drew_before(index, monkeypatch):
    """The inventory's other inputs come from a stream of their own: every recorded seed
    still draws its pools, workloads and daemons as before, the inputs added to them."""
    full = explore.generate(SEED, index)
    monkeypatch.setattr(explore, "_inputs", lambda case, rng: None)
    before = explore.generate(SEED, index)
    _without_inputs(full)
    assert full == before


def test_each_shrink_step_is_smaller_and_still_a_valid_folder(tmp_path):
    case = max((explore.generate(SEED, i) for i in range(30)), key=lambda c: c.size)
    steps = list(explore.smaller(case))
    assert steps and all(s.size < case.size for s in steps)
    for k, s in enumerate(steps[:10]):
        plan(explore.write(s, tmp_path / f"s{k}"), None, "", "", "explore", None)
    # a workload never loses the pool it is pinned to
    for s in steps:
        names = {p.name for p in s.pools}
        assert all(w.pool in names for w in s.workloads if w.pool)


def test_an_outcome_reads_each_side_and_the_suspect_differences(tmp_path):
    for name, release, found in (("check-a", "v1.14.3", []), ("check-b", "v1.15.0", ["daemons-fit"])):
        d = tmp_path / "runs" / name
        d.mkdir(parents=True)
        (d / "check.json").write_text(json.dumps({
            "decisions": {"release": release},
            "oracles": {"findings": [{"oracle": o} for o in found]}}))
    (tmp_path / "runs" / "check-b" / "compare.json").write_text(json.dumps({"differences": [
        {"field": "rounds", "key": "", "a": 1, "b": 2, "status": "suspect"},
        {"field": "zones", "key": "a", "a": 1, "b": 2, "status": "noted"}]}))
    got = runner.read_outcome(1, tmp_path)
    assert got.oracles == {"v1.14.3": [], "v1.15.0": ["daemons-fit"]}
    assert got.suspect == ["rounds: 1 -> 2"]
    assert got.signature == {"oracle daemons-fit", "differs rounds"}
    assert got.said() == "daemons-fit on v1.15.0; suspect: rounds: 1 -> 2"
    assert runner.read_outcome(0, tmp_path / "none").said() == "no verdict (exit 0, no report)"


def test_a_cases_reports_live_beside_it_not_in_it(tmp_path):
    """check reads every YAML file under a folder: a report inside would be read as manifests."""
    import argparse
    folder = tmp_path / "case-0" / "case"
    args = argparse.Namespace(cluster="local", from_v="v1.14.3", to_v="v1.15.0",
                              kubernetes_version=None)
    cmd = runner.reproduce(folder, args)
    assert cmd[cmd.index("--reports-dir") + 1] == str(tmp_path / "case-0" / "case.reports")
    assert cmd[-2:] == ["--compare-version", "v1.15.0"]
    assert "--kubernetes-version" not in cmd


def test_a_cases_command_names_the_minor_it_ran_on(tmp_path):
    """An older pair runs on a minor inside both ranges; the reproduction must say which."""
    import argparse
    args = argparse.Namespace(cluster="local", from_v="v1.0.8", to_v="v1.1.5",
                              kubernetes_version="1.30")
    cmd = runner.reproduce(tmp_path / "case", args)
    assert cmd[cmd.index("--kubernetes-version") + 1] == "1.30"


def test_a_difference_either_release_shows_against_itself_is_noise_not_a_finding(
        monkeypatch, tmp_path):
    """When FROM and TO differ, the pair runs again (the floor): what the floor's check lists
    as varying between two runs of one release is noise; what it does not stays found."""
    import argparse
    calls = []

    def fake(case, folder, args, first, lane, reports=None, floor_of=""):
        calls.append((first, bool(floor_of)))
        if not floor_of:
            return runner.Outcome(1, suspect=["instance_types m5.large: 1 -> None",
                                              "rounds: 1 -> 2"], reports="first")
        return runner.Outcome(1, suspect=["rounds: 1 -> 2"], varies=["instance_types"])
    monkeypatch.setattr(runner, "_check", fake)
    args = argparse.Namespace(cluster="local", from_v="v1.14.3", to_v="v1.15.0")
    got = runner.run_case(explore.generate(SEED, 0), tmp_path / "case", args, runner.Lane())
    assert calls == [("v1.14.3", False), ("v1.14.3", True)]  # the pair, then the pair again
    assert got.suspect == ["rounds: 1 -> 2"] and got.signature == {"differs rounds"}
    assert got.noise == ["instance_types m5.large: 1 -> None"]
    assert "within a release's own variation: instance_types" in got.said()


def _written(tmp_path: Path, name: str, a: dict, b: dict, floor_of: Path | None = None) -> dict:
    """A comparison of two decision records as check writes it into ``name``/runs/."""
    sides = []
    for i, d in enumerate((a, b)):
        out = tmp_path / name / "runs" / f"check-{i}" / "check.json"
        out.parent.mkdir(parents=True)
        sides.append({"decisions": d, "files": {"json": str(out)}, "passed": True})
    report.write_comparison(*sides, "t", floor_of=floor_of)
    return json.loads((tmp_path / name / "runs" / "check-1" / "compare.json").read_text())


def test_the_floor_reads_each_releases_two_runs_not_tos_alone(tmp_path):
    """explore v1.14.3 -> v1.15.0, seed speed-1, case 3: v1.14.3 planned in 2 rounds once (the
    second, 2 s after the first, planned 8 of its pods again, one already nominated to a
    NodeClaim of the first: one more NodeClaim, emptied later), v1.15.0 in 1 on each
    of its runs. The pair again: v1.14.3 in 1 round; rounds varies on FROM, so it is noise.
    A floor of TO alone (three runs of 1 round) read it as the releases'."""
    frm, to = {"release": "v1.14.3", "rounds": 2, "nodeclaims": 5}, \
        {"release": "v1.15.0", "rounds": 1, "nodeclaims": 4}
    first = _written(tmp_path, "case.reports", frm, to)
    assert {d["field"] for d in first["differences"] if d["status"] == "suspect"} == \
        {"rounds", "nodeclaims"}
    again = _written(tmp_path, "case.floor", {**frm, "rounds": 1, "nodeclaims": 4}, to,
                     floor_of=tmp_path / "case.reports")
    assert again["varies"] == ["nodeclaims", "rounds"]
    same = _written(tmp_path, "case.floor2", frm, to, floor_of=tmp_path / "case.reports")
    assert same["varies"] == []  # reproduced on both: the releases' difference


def test_jobs_run_cases_at_once_each_on_its_own_clusters(monkeypatch, tmp_path):
    """--jobs 2: every case's check names one of two clusters, never one another case holds
    at the time; the table lists every case in order, whatever order they ended in."""
    import threading
    holding: set[str] = set()
    lock = threading.Lock()
    seen = []

    def fake(case, folder, args, first, lane, reports=None):
        with lock:
            assert lane.cluster not in holding
            holding.add(lane.cluster)
            seen.append(lane.cluster)
        threading.Event().wait(0.05)  # the case's run, long enough for the other lane to start
        with lock:
            holding.discard(lane.cluster)
        return runner.Outcome(0)
    monkeypatch.setattr(runner, "_check", fake)
    code = runner.main(["--from", "v1.15.0", "--n", "4", "--jobs", "2", "--seed", "t",
                        "--out", str(tmp_path)])
    assert code == 0
    assert set(seen) == {"explore-0", "explore-1"} and len(seen) == 4
    table = json.loads((tmp_path / "t" / "explore.json").read_text())
    assert [c["case"] for c in table["cases"]] == [0, 1, 2, 3]


def test_a_refused_case_stops_every_lane_as_a_generator_defect(monkeypatch, tmp_path):
    monkeypatch.setattr(runner, "_check", lambda *a, **k: runner.Outcome(runner.EXIT_BAD_INPUT))
    assert runner.main(["--from", "v1.15.0", "--n", "3", "--jobs", "2", "--seed", "t",
                        "--out", str(tmp_path)]) == 2


def test_a_check_that_wrote_no_report_is_no_verdict_not_clean(tmp_path):
    """exit 1 with no check.json: the check crashed (2026-12-06: the venv was being rebuilt
    and the import of kubernetes failed); it was read as clean."""
    got = runner.read_outcome(1, tmp_path / "none", sides=2)
    assert not got.judged and got.said() == "no verdict (exit 1, no report)"
    assert not got.signature


def test_a_seed_file_lists_cases_and_a_bare_seed_stands_for_n_of_them(tmp_path):
    seeds = tmp_path / "found.seeds"
    seeds.write_text("# from the nightly\n20261206 3 7  # found: suspect\n\nother\n20261206 3\n")
    assert runner.read_seeds(seeds, 2) == [("20261206", 3), ("20261206", 7), ("other", 0),
                                           ("other", 1)]


@pytest.mark.parametrize("text, said", [
    ("ok 1\nbad x\n", "line 2: 'bad x': 'x' is not a case number"),
    ("ok -1\n", "line 1: 'ok -1': '-1' is not a case number"),
    ("# nothing\n\n", "no case in it"),
])
def test_a_seed_file_that_does_not_parse_is_refused_with_its_line(tmp_path, capsys, text, said):
    seeds = tmp_path / "bad.seeds"
    seeds.write_text(text)
    assert runner.main(["--from", "v1.15.0", "--seeds", str(seeds), "--out", str(tmp_path)]) == 2
    assert said in capsys.readouterr().err
    missing = runner.main(["--from", "v1.15.0", "--seeds", str(tmp_path / "none"),
                           "--out", str(tmp_path)])
    assert missing == 2 and "cannot be read" in capsys.readouterr().err


def test_found_cases_are_written_as_a_seed_file_that_runs_them_again(monkeypatch, tmp_path):
    """A run's found.seeds lists the cases that found something; --seeds runs exactly those
    (each in SEED-case-I/) and nothing else."""
    ran = []

    def fake(case, folder, args, first, lane, reports=None):
        ran.append(folder.parent.name)
        return runner.Outcome(1, {"v1.15.0": ["no-pod-ignored"]} if case.seed.endswith("/1")
                              else {"v1.15.0": []})
    monkeypatch.setattr(runner, "_check", fake)
    monkeypatch.setattr(runner, "shrink", lambda case, got, folder, args, lane: (case, 0))
    assert runner.main(["--from", "v1.15.0", "--n", "3", "--seed", "s", "--out",
                        str(tmp_path)]) == 1
    found = tmp_path / "s" / "found.seeds"
    assert found.read_text().startswith("s 1  # no-pod-ignored on v1.15.0")
    ran.clear()
    assert runner.main(["--from", "v1.15.0", "--seeds", str(found), "--out",
                        str(tmp_path / "again")]) == 1
    assert ran == ["s-case-1"]
    (table,) = (tmp_path / "again").glob("seeds-*/explore.json")
    assert [(c["seed"], c["case"]) for c in json.loads(table.read_text())["cases"]] == [("s", 1)]


def test_the_exit_codes_explore_reads_are_checks_own():
    """runners may not import checks.cli (it imports the oracles, fixtures): the copy is
    held to the original here."""
    from karpenter_e2e.checks import cli
    assert (runner.EXIT_BAD_INPUT, runner.EXIT_CLUSTER, runner.EXIT_INTERRUPTED) == \
        (cli.EXIT_BAD_INPUT, cli.EXIT_CLUSTER, cli.EXIT_INTERRUPTED)


def test_every_input_of_the_inventory_is_drawn_or_said_why_not():
    """What explore can draw, read from the manifests and settings it writes (checks/carried.py),
    against the inventory (docs/coverage.md): every input some case carries, or listed in
    explore.NOT_DRAWN with why; never both. A new input in clusters/karpenter/inputs.py fails
    this until the generator draws it or says why it cannot."""
    from karpenter_e2e.checks import carried
    from karpenter_e2e.clusters.karpenter.inputs import INPUTS
    inventory = {i.id for i in INPUTS}
    seen: set[str] = set()
    for i in range(400):
        case = explore.generate(SEED, i)
        seen |= carried.carried(explore.manifests(case), explore.gates(case))
    not_drawn = explore.not_drawn()
    assert set(carried.CARRIES) <= inventory and set(not_drawn) <= inventory
    assert not seen & set(not_drawn), "drawn, and said not to be"
    assert inventory - seen - set(not_drawn) == set(), "neither drawn nor said why not"
    assert "pod.tolerations.PreferNoSchedule" in seen  # the example (51, item 5)
    assert all(len(why) > 40 for why in not_drawn.values())


def test_a_release_that_lacks_an_input_never_gets_it():
    """Drawn for v1.14.3 and v1.15.0 together, a case holds nothing v1.14.3 lacks (a check it
    would refuse is a generator defect): no SCHEDULER_CONFIG, no v1.15.0-only gate."""
    from karpenter_e2e.checks import carried
    seen: set[str] = set()
    for i in range(300):
        case = explore.generate(SEED, i, ("v1.14.3", "v1.15.0"))
        seen |= carried.carried(explore.manifests(case), explore.gates(case))
    assert "options.SCHEDULER_CONFIG" not in seen and "gates.TerminateFirstDrift" not in seen
    assert {"nodepool.requirements.Gte", "gates.CapacityBuffer", "pod.doNotDisrupt.duration"} <= seen
    old = [explore.generate(SEED, i, ("v1.5.5",)) for i in range(300)]
    assert not any(c.overlay or c.buffer or any(p.replicas for p in c.pools) for c in old)
    assert not any("MIN_VALUES_POLICY" in c.settings for c in old)


def test_an_extended_resource_is_asked_with_its_limit():
    """The API server refuses an extended resource requested without an equal limit (found by
    dry-running 150 generated cases on v1.15.0: 18 refused)."""
    case = next(c for c in (explore.generate(SEED, i) for i in range(300))
                if any(w.dongle for w in c.workloads))
    pods = [m["spec"]["template"]["spec"] for m in explore.manifests(case)
            if m["kind"] in ("Deployment", "Job")]
    asked = [c["resources"] for p in pods for c in p["containers"]
             if explore.DONGLE in c["resources"]["requests"]]
    assert asked and all(r["limits"][explore.DONGLE] == r["requests"][explore.DONGLE] for r in asked)
