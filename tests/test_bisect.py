"""Bisect (runners/bisect.py): the search order with a fake "run scenario on version", the
module-tree diff on small temp trees, bad input; offline (no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_e2e.clusters.infra import releases
from karpenter_e2e.rendering.matrix import Cell
from karpenter_e2e.runners import bisect, matrix
from karpenter_e2e.runners.matrix import BadInput

V = ["v1.0.8", "v1.1.5", "v1.5.5", "v1.6.4", "v1.9.0", "v1.10.0", "v1.11.0", "v1.12.1",
     "v1.14.3", "v1.15.0"]


def fake(first_bad: str, skipped: tuple[str, ...] = (), order: list[str] | None = None):
    """Passes before ``first_bad``, fails from it on; ``skipped`` are skipped."""
    def run(v: str) -> Cell:
        if order is not None:
            order.append(v)
        if v in skipped:
            return Cell("skipped", f"Karpenter {v} lacks it")
        return Cell("failed", "boom") if V.index(v) >= V.index(first_bad) else Cell("passed")
    return run


def test_both_ends_first_then_halves():
    order: list[str] = []
    r = bisect.search(V, fake("v1.11.0", order=order))
    # index 4.5 is the middle of 0..9: v1.9.0 (the lower of two), then 6.5: v1.11.0, then 5
    assert order == ["v1.0.8", "v1.15.0", "v1.9.0", "v1.11.0", "v1.10.0"]
    assert (r.verdict, r.first_new, r.last_old) == ("found", "v1.11.0", "v1.10.0")
    assert r.message == "first failing release: v1.11.0 (the release before it, v1.10.0, passed)"
    assert [s.why for s in r.steps][:2] == ["GOOD end", "BAD end"]


@pytest.mark.parametrize("first_bad", V[1:])
def test_finds_every_first_bad_in_log_steps(first_bad):
    order: list[str] = []
    r = bisect.search(V, fake(first_bad, order=order))
    assert r.first_new == first_bad and r.last_old == V[V.index(first_bad) - 1]
    assert len(order) <= 2 + 4  # both ends, then ceil(log2(8 between))+1 at most
    assert len(set(order)) == len(order)  # no release is run twice


def test_a_skipped_release_is_neither_and_is_reported():
    order: list[str] = []
    r = bisect.search(V, fake("v1.11.0", skipped=("v1.9.0",), order=order))
    assert order[:3] == ["v1.0.8", "v1.15.0", "v1.9.0"]
    assert order[3] == "v1.10.0"  # the nearest untried to the middle instead
    assert r.first_new == "v1.11.0" and r.last_old == "v1.10.0"
    assert r.message.endswith("Skipped (neither outcome): v1.9.0")


def test_skipped_releases_next_to_the_first_failure_leave_it_open():
    r = bisect.search(V, fake("v1.10.0", skipped=("v1.9.0",)))
    assert (r.first_new, r.last_old, r.skipped) == ("v1.10.0", "v1.6.4", ["v1.9.0"])
    assert r.message.startswith("first failing release: v1.10.0, or one of v1.9.0 before it")


def test_ends_that_do_not_hold():
    r = bisect.search(V, fake("v1.0.8"))
    assert r.verdict == "old-does-not-hold" and len(r.steps) == 1
    assert r.message == "GOOD v1.0.8 does not hold: the scenario failed there (boom)"
    r = bisect.search(V, lambda v: Cell("passed"))
    assert r.verdict == "no-change" and [s.version for s in r.steps] == [V[0], V[-1]]
    assert r.message.startswith("no change: the scenario passed on GOOD v1.0.8 and on BAD")
    r = bisect.search(V, fake("v1.15.0", skipped=("v1.15.0",)))
    assert r.verdict == "new-does-not-hold" and "the scenario was skipped there" in r.message
    r = bisect.search(V, fake("v1.9.0", skipped=("v1.0.8",)))
    assert r.verdict == "old-does-not-hold" and "skipped there" in r.message


def test_a_fix_is_the_first_passing_release():
    """BROKEN/FIXED: the scenario fails up to the fix and passes from it on."""
    def fixed_in(first: str, skipped: tuple[str, ...] = ()):
        def run(v: str) -> Cell:
            if v in skipped:
                return Cell("skipped", f"Karpenter {v} lacks it")
            return Cell("passed") if V.index(v) >= V.index(first) else Cell("failed", "4 > 2")
        return run

    for first in V[1:]:
        r = bisect.search(V, fixed_in(first), terms=bisect.FIX)
        assert (r.verdict, r.first_new, r.last_old) == ("found", first, V[V.index(first) - 1])
        assert r.message.startswith(f"first passing release (the fix): {first}")
    r = bisect.search(V, fixed_in("v1.11.0", skipped=("v1.10.0",)), terms=bisect.FIX)
    assert (r.first_new, r.last_old, r.skipped) == ("v1.11.0", "v1.9.0", ["v1.10.0"])
    r = bisect.search(V, fixed_in("v1.0.8"), terms=bisect.FIX)
    assert r.verdict == "old-does-not-hold"
    assert r.message == "BROKEN v1.0.8 does not hold: the scenario passed there"
    r = bisect.search(V, lambda v: Cell("failed", "x"), terms=bisect.FIX)
    assert r.verdict == "no-change" and "failed on BROKEN v1.0.8 and on FIXED v1.15.0" in r.message


def test_two_adjacent_releases():
    r = bisect.search(["v1.14.3", "v1.15.0"], fake("v1.15.0"))
    assert (r.verdict, r.first_new, r.last_old, len(r.steps)) == ("found", "v1.15.0", "v1.14.3", 2)


def test_candidates():
    assert bisect.candidates("v1.6.4", "v1.12.1", V) == ["v1.6.4", "v1.9.0", "v1.10.0",
                                                         "v1.11.0", "v1.12.1"]
    with pytest.raises(BadInput, match="must be older"):
        bisect.candidates("v1.12.1", "v1.6.4", V)


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_module_diff_lists_added_removed_changed_with_line_counts(tmp_path):
    old = tree(tmp_path / "old", {
        "pkg/a.go": "package a\nfunc A() {}\nvar x = 1\n",
        "pkg/same.go": "package same\n",
        "kwok/gone.go": "package kwok\n\nfunc Gone() {}\n",
        "pkg/a_test.go": "old test\n",
        "pkg/testdata/x.json": "{}\n",
        "docs/readme.md": "old\n",
        "go.mod": "module x\n",
    })
    new = tree(tmp_path / "new", {
        "pkg/a.go": "package a\nfunc A() { b() }\nvar x = 1\nfunc b() {}\n",
        "pkg/same.go": "package same\n",
        "kwok/cloudprovider/new.go": "package cloudprovider\nvar N = 2\n",
        "pkg/a_test.go": "new test\n",
        "pkg/testdata/x.json": "{\"changed\": true}\n",
        "docs/readme.md": "new\n",
        "go.mod": "module x\ngo 1.26\n",
    })
    changes = bisect.module_diff(old, new)
    assert [c.line() for c in changes] == [  # by path
        "added    kwok/cloudprovider/new.go  +2 -0",
        "removed  kwok/gone.go  +0 -3",
        "changed  pkg/a.go  +2 -1",
    ]
    text = bisect.render_diff("v1.14.3", "v1.15.0", changes)
    assert text.splitlines()[0].endswith("1 changed, 1 added, 1 removed; +4 -4 lines")


def test_main_bad_input(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(releases, "served", lambda *a, **k: list(V))
    monkeypatch.setattr(releases, "_goproxy", lambda: "https://proxy.example")
    ran = []
    monkeypatch.setattr(matrix, "run_version", lambda *a, **k: ran.append(a))
    base = ["--reports-dir", str(tmp_path)]
    assert bisect.main(["--scenario", "limits", "--good", "v1.12.2", "--bad", "v1.15.0", *base]) == 2
    assert "v1.12.2 is not served" in capsys.readouterr().err
    assert bisect.main(["--scenario", "limits", "--good", "v1.15.0", "--bad", "v1.6.4", *base]) == 2
    assert "must be older" in capsys.readouterr().err
    assert bisect.main(["--scenario", "a,b", "--good", "v1.6.4", "--bad", "v1.15.0", *base]) == 2
    repo = Path(__file__).resolve().parents[1]
    assert bisect.main(["--scenario", "nosuch", "--good", "v1.6.4", "--bad", "v1.15.0",
                        "--paths", str(repo / "suites"), *base]) == 2
    assert "scenario id nosuch" in capsys.readouterr().err
    assert bisect.main(["--scenario", "limits", "--good", "v1.6.4", "--fixed", "v1.15.0", *base]) == 2
    assert "not a mix" in capsys.readouterr().err
    assert bisect.main(["--scenario", "limits", "--broken", "v1.15.0", "--fixed", "v1.6.4", *base]) == 2
    assert "BROKEN v1.15.0 must be older than FIXED v1.6.4" in capsys.readouterr().err
    assert not ran
