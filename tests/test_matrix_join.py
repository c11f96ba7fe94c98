"""Several matrix runs (the nightly's per-release jobs, or runs in different sessions) as one."""

from __future__ import annotations

import json

import pytest

from karpenter_e2e.rendering.matrix import Cell, Matrix, to_markdown
from karpenter_e2e.runners import matrix, matrix_join


def part(tmp_path, name, versions, cells, started="2026-12-04 10:00:00 UTC", wall=100.0):
    d = tmp_path / "jobs" / name
    for v in versions:
        results = d / v / "runs" / "r1" / "allure-results"
        results.mkdir(parents=True)
        (results / f"{v}-result.json").write_text(json.dumps(
            {"name": "test_up", "historyId": "h", "testCaseId": "t", "parameters": []}))
    m = Matrix(versions, sorted({s for s, _v in cells}), cells, {
        "started": started, "wall_s": wall, "command": f"matrix --versions {' '.join(versions)}",
        "commit": f"c0ffee{name}",
        "per_version": {v: {"exit": 0, "wall_s": wall, "build_s": 1.0, "log": f"{v}/pytest.log",
                            "run_dir": f"{v}/runs/r1"} for v in versions}})
    matrix.write(m, d)
    return d


def test_parts_join_into_one_table_oldest_release_first(tmp_path, capsys):
    new = part(tmp_path, "new", ["v1.15.0"], {
        ("limits", "v1.15.0"): Cell("passed"),
        ("node-limit", "v1.15.0"): Cell("passed")})
    old = part(tmp_path, "old", ["v1.6.4", "v1.10.0"], {
        ("limits", "v1.6.4"): Cell("passed"), ("limits", "v1.10.0"): Cell("passed"),
        ("node-limit", "v1.10.0"): Cell("failed", "AssertionError: 4 NodeClaims",
                                        "v1.10.0/runs/r1/timelines/node-limit.png"),
        ("node-limit", "v1.6.4"): Cell("failed", "AssertionError: 4 NodeClaims")},
        started="2026-12-03 10:00:00 UTC", wall=500.0)
    reports = tmp_path / "reports"
    assert matrix_join.main([str(new), str(old), "--reports-dir", str(reports)]) == 1
    out = (reports / "matrix-latest").resolve()
    m = Matrix.from_json(json.loads((out / "matrix.json").read_text()))
    assert m.versions == ["v1.6.4", "v1.10.0", "v1.15.0"]
    assert m.differing() == ["node-limit"]
    # Paths point at the parts' files from the joined directory.
    timeline = m.cell("node-limit", "v1.10.0").timeline
    assert (out / timeline).resolve() == old / "v1.10.0/runs/r1/timelines/node-limit.png"
    assert (out / m.meta["per_version"]["v1.15.0"]["log"]).resolve() == new / "v1.15.0/pytest.log"
    md = (out / "matrix.md").read_text()
    assert "| node-limit | **FAILED** [1] | **FAILED** [2] | passed |" in md
    assert "v1.6.4 v1.10.0: run 2026-12-03 10:00:00 UTC, wall 500.0 s, harness commit c0ffeeold" in md
    assert "v1.15.0: run 2026-12-04 10:00:00 UTC, wall 100.0 s, harness commit c0ffeenew" in md
    assert (out / "matrix.png").read_bytes()[:4] == b"\x89PNG"
    tagged = json.loads((out / "allure-results" / "v1.10.0-result.json").read_text())
    assert tagged["name"] == "test_up [v1.10.0]"
    assert "3 release(s)" in capsys.readouterr().out


def test_a_release_in_two_parts_is_refused(tmp_path, capsys):
    a = part(tmp_path, "a", ["v1.15.0"], {("limits", "v1.15.0"): Cell("passed")})
    b = part(tmp_path, "b", ["v1.15.0"], {("limits", "v1.15.0"): Cell("failed", "x")})
    assert matrix_join.main([str(a), str(b), "--reports-dir", str(tmp_path / "r")]) == 2
    assert f"release v1.15.0 is in both {a} and {b}" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_an_interrupted_matrix_is_completed_by_a_later_part(tmp_path):
    # Interrupted in v1.14.0 (its unfinished tests "not run"), v1.13.0 never reached.
    first = part(tmp_path, "first", ["v1.13.0", "v1.14.0", "v1.15.0"], {
        ("limits", "v1.15.0"): Cell("passed"),
        ("limits", "v1.14.0"): Cell("passed"), ("drift", "v1.14.0"): Cell("not run", "interrupted"),
        ("drift", "v1.15.0"): Cell("passed")})
    rest = part(tmp_path, "rest", ["v1.13.0", "v1.14.0"], {
        ("limits", "v1.13.0"): Cell("passed"), ("drift", "v1.13.0"): Cell("failed", "late"),
        ("limits", "v1.14.0"): Cell("passed"), ("drift", "v1.14.0"): Cell("passed")})
    out = tmp_path / "joined"
    m = matrix_join.join([first, rest], out)
    assert m.versions == ["v1.13.0", "v1.14.0", "v1.15.0"]
    assert [m.cell("drift", v).status for v in m.versions] == ["failed", "passed", "passed"]
    assert (out / m.meta["per_version"]["v1.14.0"]["log"]).resolve() == rest / "v1.14.0/pytest.log"
    assert [(p["versions"], p["left_out"]) for p in m.meta["parts"]] == [
        (["v1.15.0"], ["v1.13.0", "v1.14.0"]), (["v1.13.0", "v1.14.0"], [])]
    assert "not finished there, taken from another part: v1.13.0 v1.14.0" in to_markdown(m)


def test_a_release_finished_nowhere_shows_as_the_first_part_left_it(tmp_path):
    a = part(tmp_path, "a", ["v1.15.0"], {("limits", "v1.15.0"): Cell("not run", "interrupted")})
    m = matrix_join.join([a], tmp_path / "joined")
    assert m.versions == ["v1.15.0"] and m.cell("limits", "v1.15.0").status == "not run"


def test_a_matrix_names_the_harness_commit_it_ran():
    commit = matrix.harness_commit()
    assert commit and len(commit.removesuffix("-dirty")) >= 7


def test_not_a_matrix_directory(tmp_path, capsys):
    assert matrix_join.main([str(tmp_path), "--reports-dir", str(tmp_path / "r")]) == 2
    assert f"{tmp_path} is not a matrix directory" in capsys.readouterr().err


@pytest.mark.parametrize("versions, printed", [
    ("v1.15.0 v1.6.4", ["v1.6.4", "v1.15.0"]),
])
def test_print_versions_is_the_nightlys_job_list(versions, printed, monkeypatch, capsys,
                                                  tmp_path):
    from karpenter_e2e.clusters.infra import releases
    monkeypatch.setattr(releases, "served", lambda *a, **k: ["v1.6.4", "v1.15.0"])
    assert matrix.main(["--print-versions", "--versions", versions,
                        "--reports-dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out) == printed
    assert not list(tmp_path.iterdir())
    assert matrix.main(["--print-versions", "--reports-dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out) == ["v1.6.4", "v1.15.0"]


def test_out_writes_there_and_points_nothing(tmp_path):
    a = part(tmp_path, "a", ["v1.15.0"], {("limits", "v1.15.0"): Cell("passed")})
    assert matrix_join.main(["--out", str(tmp_path / "joined"), str(a),
                             "--reports-dir", str(tmp_path / "r")]) == 0
    assert (tmp_path / "joined" / "matrix.json").is_file() and not (tmp_path / "r").exists()
