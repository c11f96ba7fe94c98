"""The upgrade gate's performance comparison: Karpenter's /metrics read, the TO/FROM ratios
against their limits, the table, the picture and the verdict (no cluster)."""

import json
import math
import threading
import time
from pathlib import Path

import pytest

from karpenter_e2e.clusters.api.waits import WaitTimeout
from karpenter_e2e.fixtures import barrier
from karpenter_e2e.fixtures.karpenter_metrics import MetricsFormatError, ProcessSampler, parse
from karpenter_e2e.rendering import perf_chart
from karpenter_e2e.rendering.perf_comparison import (
    BY_KEY,
    Row,
    breaches,
    compare,
    load,
    main as compare_main,
    markdown as table,
    parse_limits,
)
from karpenter_e2e.runners import upgrade_gate
from karpenter_e2e.runners.upgrade_gate import markdown, verdict

DATA = Path(__file__).parent / "data"
FROM = {"scale_out_s": 20.0, "nodes": 27, "cost_per_hour": 24.19, "karpenter_cpu_s": 30.0,
        "karpenter_peak_rss_mib": 150.0, "consolidation_s": 200.0}


def test_metrics_page_parses_process_figures_and_labelled_series():
    values = parse((DATA / "karpenter-metrics-v1.14.3.txt").read_text())
    assert values["process_cpu_seconds_total"] == 0.38
    assert values["process_resident_memory_bytes"] == 78180352.0
    assert values['controller_runtime_reconcile_time_seconds_bucket'
                  '{controller="disruption",le="+Inf"}'] == 1.0
    assert not any(k.startswith("#") for k in values)


def test_metrics_labels_with_spaces_timestamps_and_special_values():
    values = parse('x{msg="a b } c"} 2 1700000000000\ny NaN\nz +Inf\n')
    assert values['x{msg="a b } c"}'] == 2.0
    assert math.isnan(values["y"]) and values["z"] == math.inf


@pytest.mark.parametrize("line", ["process_cpu_seconds_total", "x{a=\"b\"}", "x twelve"])
def test_a_malformed_metrics_line_is_refused_with_its_number(line):
    with pytest.raises(MetricsFormatError, match="line 2"):
        parse(f"# HELP x\n{line}\n")


def _pages(*pairs):
    """/metrics pages with these (CPU seconds, RSS bytes); None: Karpenter did not answer."""
    pages = [None if p is None else
             f"process_cpu_seconds_total {p[0]}\nprocess_resident_memory_bytes {p[1]}\n"
             for p in pairs]
    return lambda: pages.pop(0)


def test_sampler_cpu_is_last_minus_first_and_memory_the_largest_sample():
    sampler = ProcessSampler(_pages((10.0, 100 * 2**20), None, (14.5, 300 * 2**20),
                                    (20.25, 200 * 2**20)), interval=0.01)
    for _ in range(4):
        sampler.sample()
    assert sampler.summary() == {"karpenter_cpu_s": 10.25, "karpenter_peak_rss_mib": 300.0,
                                 "metrics_samples": 3, "metrics_misses": 1,
                                 "metrics_interval_s": 0.01}


def test_sampler_refuses_a_page_without_the_process_collector_at_once():
    sampler = ProcessSampler(lambda: "karpenter_nodes_total 3\n")
    with pytest.raises(MetricsFormatError, match="no process_cpu_seconds_total, "
                                                 "process_resident_memory_bytes"):
        sampler.start()


def test_sampler_thread_samples_until_stopped_and_reports_its_error():
    cpu = iter(range(1000))
    sampler = ProcessSampler(lambda: f"process_cpu_seconds_total {next(cpu)}\n"
                                     f"process_resident_memory_bytes 1\n", interval=0.01)
    sampler.start()
    deadline = time.monotonic() + 5
    while len(sampler.samples) <= 3 and time.monotonic() < deadline:  # the thread samples
        time.sleep(0.01)
    sampler.stop()
    assert len(sampler.samples) > 3
    assert sampler.summary()["karpenter_cpu_s"] == len(sampler.samples) - 1
    broken = ProcessSampler(_pages((1, 1), (2, 1)), interval=0.01).start()
    broken.read = lambda: "garbage\n"
    with pytest.raises(MetricsFormatError):
        broken.stop()


def test_too_few_samples_is_an_error_not_a_zero():
    sampler = ProcessSampler(_pages((1, 1)))
    sampler.sample()
    with pytest.raises(ValueError, match="1 /metrics samples"):
        sampler.summary()


def test_limits_default_and_per_metric_overrides():
    limits = parse_limits(1.5, "nodes=1.2, consolidation_s=2")
    assert limits == {**dict.fromkeys(BY_KEY, 1.5), "nodes": 1.2, "consolidation_s": 2.0}


@pytest.mark.parametrize("default,overrides,message", [
    (0.9, "", "at least 1"),
    (1.5, "speed=2", "unknown metric 'speed'"),
    (1.5, "nodes=fast", "expected METRIC=RATIO"),
    (1.5, "nodes=0.8", "below 1 fails an unchanged run"),
])
def test_bad_limits_are_refused(default, overrides, message):
    with pytest.raises(ValueError, match=message):
        parse_limits(default, overrides)


def test_ratio_over_its_limit_fails_with_both_figures():
    to = {**FROM, "karpenter_cpu_s": 51.0}
    rows = compare(FROM, to, parse_limits(1.5))
    cpu = next(r for r in rows if r.metric.key == "karpenter_cpu_s")
    assert cpu.ratio == pytest.approx(1.7) and not cpu.ok
    assert [r.metric.key for r in rows if not r.ok] == ["karpenter_cpu_s"]
    assert breaches(rows, "v1.14.3", "v1.15.0") == [
        "perf: karpenter_cpu_s TO/FROM = 1.70 > 1.5 (v1.14.3 30.0 s, v1.15.0 51.0 s)"]


def test_a_ratio_at_the_limit_passes_and_just_over_fails():
    assert Row(BY_KEY["consolidation_s"], 200.0, 300.0, 1.5).ok
    assert not Row(BY_KEY["consolidation_s"], 200.0, 306.0, 1.5).ok


def test_small_absolute_differences_never_fail():
    # 2 s -> 5 s is 2.5x, but within the 1 s timestamps and 2 s polls of the measurement.
    assert Row(BY_KEY["scale_out_s"], 2.0, 5.0, 1.5).ok
    assert not Row(BY_KEY["scale_out_s"], 2.0, 5.5, 1.5).ok
    assert not Row(BY_KEY["nodes"], 2, 4, 1.5).ok  # a node is never noise


def test_improvements_and_zero_baselines():
    assert Row(BY_KEY["nodes"], 27, 13, 1.5).ok  # fewer nodes: fine
    assert Row(BY_KEY["cost_per_hour"], 0.0, 0.0, 1.5).ratio == 1.0
    row = Row(BY_KEY["cost_per_hour"], 0.0, 1.0, 1.5)
    assert row.ratio == math.inf and not row.ok


def test_a_figure_missing_on_one_side_fails_and_says_where():
    rows = compare(FROM, {k: v for k, v in FROM.items() if k != "consolidation_s"},
                   parse_limits(1.5))
    assert breaches(rows, "v1.14.3", "v1.15.0") == [
        "perf: consolidation_s not measured on v1.15.0"]


def test_table_has_a_row_per_figure_with_values_ratio_and_limit():
    rows = compare(FROM, {**FROM, "nodes": 41, "karpenter_peak_rss_mib": 160.0},
                   parse_limits(1.5, "nodes=1.2"))
    lines = table(rows, "v1.14.3", "v1.15.0").splitlines()
    assert lines[0] == "| figure | v1.14.3 | v1.15.0 | TO/FROM | limit | |"
    assert len(lines) == 2 + len(BY_KEY)
    assert "| nodes at scale-out | 27 | 41 | 1.52 | 1.2 | **over** |" in lines
    assert "| Karpenter peak resident memory | 150 MiB | 160 MiB | 1.07 | 1.5 | ok |" in lines
    assert "| their cost per hour (catalogue prices) | $24.19/h | $24.19/h | 1.00 | 1.5 | ok |" \
        in lines


def _measurement(directory: Path, version: str, values: dict) -> Path:
    timings = directory / "runs" / "r1" / "timings"
    timings.mkdir(parents=True)
    (timings / "other.json").write_text(json.dumps({"scenario": "scale", "values": {}}))
    path = timings / "perf.json"
    path.write_text(json.dumps({
        "scenario": "scale-perf", "values": values, "notes": {"karpenter": version},
        "series": {"pods_ready_s": [3.0, 4.0, 4.0, 9.0], "nodes_s": [[2.0, 60.0], [3.0, 95.0]],
                   "scale_in_s": [12.0]}}))
    (directory / "latest").symlink_to(Path("runs") / "r1")
    return path


def test_load_finds_the_scale_perf_file_of_a_run(tmp_path):
    _measurement(tmp_path / "a", "v1.14.3", FROM)
    assert load(tmp_path / "a" / "latest")["notes"]["karpenter"] == "v1.14.3"
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no scale-perf measurements"):
        load(tmp_path / "empty")


def test_compare_command_exit_code_says_whether_all_held(tmp_path, capsys):
    a = _measurement(tmp_path / "a", "v1.14.3", FROM)
    b = _measurement(tmp_path / "b", "v1.15.0", {**FROM, "scale_out_s": 45.0})
    assert compare_main([str(a), str(a)]) == 0
    assert compare_main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "perf: scale_out_s TO/FROM = 2.25 > 1.5 (v1.14.3 20.0 s, v1.15.0 45.0 s)" in out
    assert compare_main([str(a), str(b), "--ratios", "scale_out_s=3"]) == 0
    assert compare_main([str(a), str(tmp_path / "none")]) == 2
    assert compare_main([str(a), str(b), "--chart", str(tmp_path / "perf.png")]) == 1
    assert (tmp_path / "perf.png").read_bytes()[:4] == b"\x89PNG"  # the gate's picture too


def test_gate_compares_its_two_perf_phases_into_verdict_table_and_picture(tmp_path):
    out = tmp_path / "gate"
    _measurement(upgrade_gate.perf_dir(out, "v1.14.3"), "v1.14.3", FROM)
    _measurement(upgrade_gate.perf_dir(out, "v1.15.0"), "v1.15.0",
                 {**FROM, "consolidation_s": 410.0})
    perf = upgrade_gate.compare_perf(out, "v1.14.3", "v1.15.0", parse_limits(1.5))
    assert perf["reasons"] == ["perf: consolidation_s TO/FROM = 2.05 > 1.5 "
                               "(v1.14.3 200.0 s, v1.15.0 410.0 s)"]
    assert Path(perf["chart"]).read_bytes()[:4] == b"\x89PNG"
    assert (out / "perf.md").read_text() == perf["table"]
    (out / "s.xml").write_text('<testsuites><testsuite><testcase name="t"/></testsuite>'
                               '</testsuites>')
    v = verdict({"suites": (0, out / "s.xml")}, "v1.14.3", "v1.15.0", perf)
    assert v["verdict"] == "fail" and v["reasons"] == perf["reasons"]
    text = markdown(v)
    assert "## Performance, v1.14.3 vs v1.15.0" in text
    assert "| consolidation: scale to 0 → last node gone | 200.0 s | 410.0 s | 2.05 | 1.5 | " \
           "**over** |" in text


def test_gate_without_a_perf_phase_result_fails_naming_the_version(tmp_path):
    out = tmp_path / "gate"
    _measurement(upgrade_gate.perf_dir(out, "v1.14.3"), "v1.14.3", FROM)
    perf = upgrade_gate.compare_perf(out, "v1.14.3", "v1.15.0", parse_limits(1.5))
    assert perf["missing"] == ["v1.15.0"]
    assert perf["reasons"][0] == "perf: scale_out_s not measured on v1.15.0"
    assert len(perf["reasons"]) == len(BY_KEY)


@pytest.mark.parametrize("args,message", [
    (["--perf-max-ratio", "0.5"], "at least 1"),
    (["--perf-ratios", "memory=2"], "unknown metric 'memory'"),
    (["--perf-pods", "-5"], "--perf-pods -5"),
])
def test_gate_refuses_bad_perf_options_before_anything_runs(args, message, capsys, tmp_path):
    rc = upgrade_gate.main(["--from", "v1.14.3", "--to", "v1.15.0", "--out", str(tmp_path),
                            *args])
    assert rc == 2 and message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written, no cluster started


def test_picture_draws_both_runs_and_every_ratio(tmp_path):
    runs = []
    for version, values in (("v1.14.3", FROM), ("v1.15.0", {**FROM, "nodes": 41})):
        runs.append((version, load(_measurement(tmp_path / version, version, values))))
    rows = compare(runs[0][1]["values"], runs[1][1]["values"], parse_limits(1.5))
    path = perf_chart.render(runs, rows, tmp_path / "perf.png")
    assert path.read_bytes()[:4] == b"\x89PNG" and path.stat().st_size > 20_000


def test_barrier_lets_runs_go_only_together(tmp_path):
    done = []
    other = threading.Thread(target=lambda: done.append(
        barrier.meet(tmp_path / "b", "gate-to", 2, timeout=10)))
    other.start()
    other.join(0.5)
    assert other.is_alive() and not done  # alone at the barrier: still waiting
    barrier.meet(tmp_path / "b", "gate-from", 2, timeout=10)
    other.join(5)
    assert done == [None]


def test_barrier_alone_times_out_saying_who_came(tmp_path):
    with pytest.raises(WaitTimeout) as err:
        barrier.meet(tmp_path / "b", "gate-from", 2, timeout=0.5)
    assert "1 of 2 here: ['gate-from']" in str(err.value.seen)
