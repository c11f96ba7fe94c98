"""kind clusters earlier runs left behind (a crash, a killed job, Docker stopped mid-run).

Each kind cluster of the harness lives on a Docker network of its own, labelled with the
cluster's name and its creation time (cluster.py). A sweep finds those networks, and removes
each cluster older than the age given (`kind delete cluster`, else its containers by kind's
label), then the network. Age keeps a sweep from touching a run still in progress.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from karpenter_e2e.clusters.infra import process
from karpenter_e2e.clusters.kind import nodeimage
from karpenter_e2e.clusters.kind.cluster import CREATED_LABEL, NETWORK_LABEL

log = logging.getLogger(__name__)

KIND_LABEL = "io.x-k8s.kind.cluster"  # kind labels each node container with its cluster


@dataclass(frozen=True)
class Leftover:
    cluster: str
    network: str
    age_s: float
    containers: tuple[str, ...]


def leftovers(now: float | None = None) -> list[Leftover]:
    """The harness's kind clusters on this Docker, by their networks' labels."""
    now = time.time() if now is None else now
    proc = process.run(["docker", "network", "ls", "--filter", f"label={NETWORK_LABEL}",
                        "--format", "{{.Name}}"], 60)
    found = []
    for network in proc.stdout.split():
        inspected = process.run(["docker", "network", "inspect", network], 60)
        if inspected.returncode != 0:
            continue
        labels = json.loads(inspected.stdout)[0].get("Labels") or {}
        cluster = labels.get(NETWORK_LABEL, "")
        created = float(labels.get(CREATED_LABEL, now))
        ps = process.run(["docker", "ps", "-a", "--filter", f"label={KIND_LABEL}={cluster}",
                          "--format", "{{.Names}}"], 60)
        found.append(Leftover(cluster, network, now - created, tuple(ps.stdout.split())))
    return found


def sweep(max_age: timedelta, dry_run: bool = False) -> list[str]:
    """Remove the clusters older than ``max_age``; what was (or would be) removed."""
    done = []
    for left in leftovers():
        if left.age_s < max_age.total_seconds():
            continue
        what = (f"kind cluster {left.cluster} ({len(left.containers)} container(s), network "
                f"{left.network}, {left.age_s / 60:.0f} min old)")
        done.append(what)
        if dry_run:
            continue
        kind = nodeimage.kind_target().path  # only if built: a sweep builds nothing
        if kind.exists() and left.containers:
            process.run([str(kind), "delete", "cluster", "--name", left.cluster], 300)
        for container in left.containers:  # what kind left (or all, without kind)
            process.run(["docker", "rm", "-f", "-v", container], 120)
        process.run(["docker", "network", "rm", left.network], 60)
        log.warning("swept %s", what)
    return done
