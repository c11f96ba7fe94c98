"""`make soak N=20`: the same run N times back to back, each one reported.

    karpenter-e2e soak --runs N [--reports-dir reports] -- COMMAND...

Every run's exit code, wall time, pytest closing line, failed tests, the machine's load
average (1-minute, at its start and end; the peak of samples every 5 s) and what the machine
took away (steal, stalls: clusters/infra/stalls.py) are appended to
``reports/soak-<start>.md`` as each run ends, so a soak cut short still says what it saw.
Nothing is retried: a soak is the proof that the default run does not flake.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from karpenter_e2e.clusters.api.poller import Poller
from karpenter_e2e.clusters.infra.stalls import MachineWatch
from karpenter_e2e.runners.children import Child, Children

CLOSING = re.compile(r"=+ (.*(?:passed|failed|errors?|skipped|no tests ran).* in [\d.]+s.*?) =+$")
FAILED = re.compile(r"^(?:\[[^\]]+\] )?(?:FAILED|ERROR) (\S+)")


def _load() -> float:
    return os.getloadavg()[0]


def run_once(cmd: list[str], log: Path) -> dict:
    peak = [_load()]

    def sample() -> None:
        peak[0] = max(peak[0], _load())

    sampler = Poller(sample, 5, name="soak-load", wait_first=True)
    start_load, t0 = _load(), time.monotonic()
    sampler.start()
    machine = MachineWatch().start()
    closing, failed = "", []

    def read(line: str) -> None:
        nonlocal closing
        if m := CLOSING.search(line.strip()):
            closing = m.group(1)
        if m := FAILED.match(line):
            failed.append(m.group(1))

    children = Children()
    with children.stopped_by_signals("soak"):  # the run takes its clusters down first
        rc = children.run(Child("soak", cmd, log, on_line=read))
    sampler.stop()
    machine.stop()
    return {"interrupted": children.interrupted.is_set(), "rc": 130 if rc is None else rc,
            "machine": machine.as_dict(),
            "wall": time.monotonic() - t0,
            "closing": closing or "(no closing line)", "failed": sorted(set(failed)),
            "load_start": start_load, "load_end": _load(), "load_peak": peak[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="karpenter-e2e soak")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--reports-dir", type=Path, default=Path("reports"))
    ap.add_argument("command", nargs=argparse.REMAINDER)
    opts = ap.parse_args(argv)
    cmd = [a for a in opts.command]
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    if opts.runs < 1 or not cmd:
        print("soak: need --runs >= 1 and a command after --", file=sys.stderr)
        return 4
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report = opts.reports_dir / f"soak-{stamp}.md"
    logs = opts.reports_dir / f"soak-{stamp}"
    logs.mkdir(parents=True, exist_ok=True)
    report.write_text(f"# Soak {stamp}: {opts.runs} runs of `{' '.join(cmd)}`\n\n"
                      f"Machine: {os.cpu_count()} cores; load = 1-minute load average.\n\n"
                      "Steal: the hypervisor's share of CPU time over the run; stalls: sleeps "
                      "that overran by more than 1 s (the machine stopped), their count and the "
                      "longest.\n\n"
                      "| run | exit | wall s | closing line | failed | load start/peak/end "
                      "| steal % | stalls (longest s) |\n"
                      "|---|---|---|---|---|---|---|---|\n")
    green = ran = 0
    interrupted = False
    for n in range(1, opts.runs + 1):
        ran = n
        r = run_once(cmd, logs / f"run-{n:02d}.log")
        green += r["rc"] == 0
        row = (f"| {n} | {r['rc']} | {r['wall']:.0f} | {r['closing']} | "
               f"{', '.join(r['failed']) or '-'} | "
               f"{r['load_start']:.2f}/{r['load_peak']:.2f}/{r['load_end']:.2f} | "
               f"{r['machine']['steal_pct']:.2f} | {r['machine']['stalls']} "
               f"({(r['machine']['longest'] or {}).get('seconds', 0):.1f}) |\n")
        with open(report, "a") as fh:
            fh.write(row)
        print(f"soak: run {n}/{opts.runs}: exit {r['rc']} in {r['wall']:.0f}s: {r['closing']}"
              f"{' FAILED ' + ', '.join(r['failed']) if r['failed'] else ''}; steal "
              f"{r['machine']['steal_pct']:.1f} %, {r['machine']['stalls']} stall(s)", flush=True)
        if r["interrupted"]:  # no further run starts
            interrupted = True
            break
    if interrupted:
        with open(report, "a") as fh:
            fh.write(f"\nInterrupted (SIGINT or SIGTERM) in run {ran}.\n")
        print(f"soak: interrupted in run {ran}; {green} of {ran} runs green; {report}")
        return 130
    with open(report, "a") as fh:
        fh.write(f"\n{green} of {opts.runs} runs green.\n")
    print(f"soak: {green} of {opts.runs} runs green; {report}")
    return 0 if green == opts.runs else 1
