"""make soak: every run reported, with what the machine took away from it."""

import sys

from karpenter_e2e.runners import soak


def test_each_run_is_a_row_with_its_steal_and_stalls(tmp_path, capsys):
    run = [sys.executable, "-c", "print('=' * 5 + ' 3 passed, 1 skipped in 0.01s ' + '=' * 5)"]
    assert soak.main(["--runs", "2", "--reports-dir", str(tmp_path), "--", *run]) == 0
    report = next(tmp_path.glob("soak-*.md")).read_text()
    rows = [line for line in report.splitlines() if line.startswith("| 1 ") or
            line.startswith("| 2 ")]
    assert len(rows) == 2 and "| steal % | stalls (longest s) |" in report
    cells = rows[0].strip("|").split("|")
    assert cells[3].strip() == "3 passed, 1 skipped in 0.01s"
    assert 0.0 <= float(cells[6]) <= 100.0 and cells[7].strip() == "0 (0.0)"
    assert report.rstrip().endswith("2 of 2 runs green.")
    assert "steal" in capsys.readouterr().out


def test_a_red_run_names_its_failed_test(tmp_path):
    run = [sys.executable, "-c", "print('FAILED suites/t.py::test_x - boom'); "
                                 "print('= 1 failed in 0.01s ='); raise SystemExit(1)"]
    assert soak.main(["--runs", "1", "--reports-dir", str(tmp_path), "--", *run]) == 1
    report = next(tmp_path.glob("soak-*.md")).read_text()
    assert "| 1 | 1 |" in report and "suites/t.py::test_x" in report
    assert report.rstrip().endswith("0 of 1 runs green.")
