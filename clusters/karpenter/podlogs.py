"""Karpenter's log, where it runs in a pod: followed into a file, as local mode's process
writes its own, so the oracles and reports read one record in every mode.

    python -m karpenter_e2e.clusters.karpenter.podlogs --kubeconfig K --namespace NS \\
        --selector app.kubernetes.io/name=karpenter --out karpenter.log [--context C]

It runs until stopped (the cluster's ``down``, by its ``--out`` path in its command line).
Each container instance (pod uid, restart count) is streamed once, from its first line to
its end, so a container restart, a rolling upgrade or a new pod each append their own log;
lines of two pods at once (a rolling update) are appended whole, never cut into each other.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from pathlib import Path
from typing import Any

from kubernetes.client.rest import ApiException

from karpenter_e2e.clusters.api.kube import Kube
from karpenter_e2e.clusters.api.waits import pause

log = logging.getLogger(__name__)

POLL_S = 1.0  # how soon a new pod or a restarted container is followed
CONTAINER = "controller"  # the chart's container name, in the core and the AWS chart alike


class Follower:
    def __init__(self, kube: Kube, namespace: str, selector: str, out: Path):
        self.kube, self.namespace, self.selector, self.out = kube, namespace, selector, out
        self.lock = threading.Lock()
        self.followed: set[tuple[str, int]] = set()

    def write(self, line: bytes) -> None:
        with self.lock, open(self.out, "ab") as fh:
            fh.write(line if line.endswith(b"\n") else line + b"\n")

    def instances(self) -> list[tuple[str, str, int]]:
        """(pod name, uid, restart count) of each controller container that has started."""
        found = []
        for pod in self.kube.pods(self.namespace, self.selector):
            meta = pod.metadata
            for status in (pod.status.container_statuses or []) if pod.status else []:
                started = status.state and (status.state.running or status.state.terminated)
                if status.name == CONTAINER and started and meta and meta.name and meta.uid:
                    found.append((meta.name, meta.uid, status.restart_count))
        return found

    def stream(self, pod: str) -> None:
        try:
            # a urllib3 response, unread (the client's signature says str)
            resp: Any = self.kube.core.read_namespaced_pod_log(
                pod, self.namespace, container=CONTAINER, follow=True, _preload_content=False)
            buffer = b""
            for chunk in resp.stream(4096):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self.write(line)
            if buffer:
                self.write(buffer)
        except (ApiException, OSError) as exc:  # the pod went while it was read
            log.info("stopped following %s: %s", pod, exc)

    def run(self) -> None:
        while True:
            try:
                current = self.instances()
            except (ApiException, OSError) as exc:  # the API server restarting: ask again
                log.info("cannot list Karpenter's pods yet: %s", exc)
                current = []
            for pod, uid, restarts in current:
                if (uid, restarts) not in self.followed:
                    self.followed.add((uid, restarts))
                    threading.Thread(target=self.stream, args=(pod,), daemon=True).start()
            pause(POLL_S)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="podlogs", description=__doc__)
    p.add_argument("--kubeconfig", required=True, type=Path)
    p.add_argument("--context")
    p.add_argument("--namespace", required=True)
    p.add_argument("--selector", required=True)
    p.add_argument("--out", required=True, type=Path)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s podlogs %(message)s",
                        stream=sys.stderr)
    Follower(Kube(args.kubeconfig, args.context), args.namespace, args.selector, args.out).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
