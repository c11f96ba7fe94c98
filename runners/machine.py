"""How many local clusters, and workers per cluster, this machine runs at once.

The figures are measured (docs/measurements.md, "One local cluster's cost"): the resident
memory of one cluster's processes (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok, Karpenter) and of one xdist worker, at their peak under the suites,
and the CPU a busy cluster with its workers keeps. The suites wait on Karpenter's clocks,
not the CPU, so a cluster's share of a core is well under one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# Peak RSS under `make e2e`, MiB: a cluster 642-751 MiB (idle: 567 MiB); a lane's pytest
# about 140 MiB a process (a chain and one plain pytest: 234-295 MiB).
CLUSTER_PEAK_MIB = 760
WORKER_PEAK_MIB = 150
# Cores one lane keeps busy (its processes' CPU seconds / its wall seconds): 0.10-0.28 over
# 8 lanes, mean 0.21 (an idle cluster alone: 0.04). Lanes are sized to keep CPU_TARGET of
# the cores busy at that rate.
CLUSTER_BUSY_CORES = 0.21
# kind (docs/measurements.md, "One kind cluster's cost"): the node container's memory as
# `docker stats` counts it (usage less inactive file cache) and its CPU seconds over a run of
# the suites, and `kind create` plus Karpenter's chart, one after another, on this machine.
KIND_CLUSTER_PEAK_MIB = 950
KIND_BUSY_CORES = 0.37
KIND_BRINGUP_S = 150.0
CPU_TARGET = 0.75
WORKERS_PER_CLUSTER = 4  # plain tests at once on a plain lane (serial lanes run one)
MAX_CLUSTERS = 8  # 10 at once kept 2 cores 100% busy (load 21) and was slower
# Clusters come up one after another (6.9 s on an idle machine; 5.7-10.3 s beside running
# lanes): lane k's tests are planned to start k times this late.
BRINGUP_S = 8.0
MEMORY_HEADROOM = 0.8  # of MemAvailable, the rest left to the OS and the runner


class SizeError(ValueError):
    """K clusters that the machine cannot hold."""


@dataclass(frozen=True)
class Size:
    clusters: int
    workers: int
    why: str


def available_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    raise SizeError("cannot read MemAvailable from /proc/meminfo")


@dataclass(frozen=True)
class Cost:
    """What one cluster of a mode that runs several at once costs (measured, above)."""

    peak_mib: int
    busy_cores: float
    bringup_s: float
    # Whether the settings lanes count toward the clusters the cores allow. A kind cluster's
    # bring-up keeps a core busy for a minute: two settings lanes coming up beside 4 kind
    # lanes on 2 cores made load 33, `kind create` took 339 s (25 s idle) and both failed to
    # come up (2026-12-07). A local cluster comes up in seconds: there they ride on top.
    settings_within: bool = False


COSTS = {"local": Cost(CLUSTER_PEAK_MIB, CLUSTER_BUSY_CORES, BRINGUP_S),
         "kind": Cost(KIND_CLUSTER_PEAK_MIB, KIND_BUSY_CORES, KIND_BRINGUP_S,
                      settings_within=True)}
LANE_MODES = tuple(COSTS)  # the modes whose clusters the runner brings up itself, as lanes


def cluster_mib(workers: int, mode: str = "local") -> int:
    return COSTS[mode].peak_mib + workers * WORKER_PEAK_MIB


def plan(clusters: int | None, workers: int | None, mode: str = "local",
         cores: int | None = None, mem_mib: int | None = None) -> Size:
    """The K and W to run; a K the memory cannot hold is an error before anything starts."""
    cores = cores or os.cpu_count() or 1
    mem_mib = mem_mib if mem_mib is not None else available_mib()
    w = workers or WORKERS_PER_CLUSTER
    if w < 1:
        raise SizeError(f"--workers {w}: at least one worker per cluster")
    if mode not in COSTS:
        if clusters not in (None, 1):
            raise SizeError(f"--clusters {clusters}: several clusters at once is for "
                            f"{' and '.join(LANE_MODES)} mode ({mode} runs one cluster; shard "
                            f"across jobs instead)")
        return Size(1, w, f"{mode} mode: one cluster, {w} workers")
    cost = COSTS[mode]
    budget = int(mem_mib * MEMORY_HEADROOM)
    by_memory = budget // cluster_mib(w, mode)
    if clusters is not None:
        if clusters < 1:
            raise SizeError(f"--clusters {clusters}: at least one")
        if clusters > by_memory:
            raise SizeError(
                f"--clusters {clusters} with {w} workers each needs about "
                f"{clusters * cluster_mib(w, mode)} MiB ({cluster_mib(w, mode)} MiB a cluster at its "
                f"measured peak); this machine has {mem_mib} MiB available, so at most "
                f"{by_memory} fit")
        return Size(clusters, w, f"{clusters} cluster(s) × {w} workers (as asked)")
    by_cpu = max(1, int(cores * CPU_TARGET / cost.busy_cores))
    k = max(1, min(MAX_CLUSTERS, by_cpu, by_memory))
    return Size(k, w, f"{k} cluster(s) × {w} workers ({cores} cores: {by_cpu} by CPU; "
                      f"{mem_mib} MiB available: {by_memory} by memory; at most {MAX_CLUSTERS})")
