"""The fake AWS process of aws-sim mode: moto's threaded server with the harness's
extensions, seeded like an EKS account, and the instance -> Node registrar.

Run as ``python -m karpenter_e2e.clusters.awssim.server --run-dir DIR ...`` by the cluster backend, which
keeps its pid and log in the run directory. Once everything is seeded it writes
``DIR/aws.json`` (the seeded facts); SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from karpenter_e2e.clusters.awssim import moto_ext, seed
from karpenter_e2e.clusters.awssim.registrar import Registrar
from karpenter_e2e.clusters.infra.filelock import write_whole

log = logging.getLogger("aws-sim")
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run-dir", required=True, type=Path)
    p.add_argument("--port", required=True, type=int)
    p.add_argument("--region", required=True)
    p.add_argument("--cluster", required=True)
    p.add_argument("--kubernetes-version", required=True)
    p.add_argument("--kubeconfig", required=True, type=Path)
    p.add_argument("--pricing-go", required=True, type=Path)
    p.add_argument("--zones", required=True, help="comma-separated")
    p.add_argument("--response-cache", type=Path, default=None,
                   help="file keeping moto's serialized static answers between runs")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to serve on (a kind network's gateway, for pods to reach)")
    p.add_argument("--seed", choices=("account", "published"), default="account",
                   help="account: everything an EKS account holds after the getting-started "
                        "steps (aws-sim); published: only what AWS itself publishes (the "
                        "EKS-optimized AMIs and their SSM parameters), the rest made later "
                        "through the API as the nightly makes it")
    p.add_argument("--node-annotation", action="append", default=[], metavar="KEY=VALUE",
                   help="an annotation the registrar puts on every Node (repeatable)")
    p.add_argument("--no-price-label", action="store_true",
                   help="register Nodes without the price label, as EC2 instances join a real "
                        "EKS cluster (the rehearsal: eks mode then prices nodes from "
                        "Karpenter's /metrics, as it must on a real account)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout,
                        format="%(asctime)s.%(msecs)03d %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    os.environ.update(DUMMY_CREDENTIALS)
    os.environ.pop("AWS_PROFILE", None)

    import boto3
    from kubernetes import client, config
    from moto.backends import get_backend
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    prices = moto_ext.Prices(moto_ext.on_demand_prices(args.pricing_go))
    moto_ext.install(prices, lambda: get_backend("ec2")[seed.ACCOUNT][args.region],
                     response_cache=args.response_cache)
    server = ThreadedMotoServer(ip_address=args.host, port=args.port, verbose=False)
    server.start()
    endpoint = f"http://{args.host}:{args.port}"
    session = boto3.Session(region_name=args.region, **{
        "aws_access_key_id": "testing", "aws_secret_access_key": "testing"})
    clients = _with_endpoint(session, endpoint)
    if args.seed == "account":
        seeded = seed.seed(clients, args.region, args.cluster, args.kubernetes_version,
                           args.zones.split(","))
    else:
        seeded = seed.Seeded(region=args.region, cluster=args.cluster,
                             zones=args.zones.split(","))
        seed.published_amis(clients.client("ec2"), args.region, args.kubernetes_version, seeded)
    write_whole(args.run_dir / "aws.json", seeded.to_json())
    log.warning("fake AWS on %s seeded for cluster %s (%d zones, AMIs %s)", endpoint,
                args.cluster, len(seeded.zones), ", ".join(sorted(seeded.amis)))

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    api = None
    while api is None and not stop.is_set():
        try:  # the control plane comes up alongside: its kubeconfig appears in seconds
            api = client.CoreV1Api(config.new_client_from_config(str(args.kubeconfig)))
        except Exception:  # noqa: BLE001 - not written yet (or half-written): try again
            stop.wait(0.2)
    if api is None:  # SIGTERM before the cluster came up
        server.stop()
        return 0
    annotations = dict(a.split("=", 1) for a in args.node_annotation)
    registrar = Registrar(clients.client("ec2"), api, args.region, args.kubernetes_version,
                          price=None if args.no_price_label else prices.price,
                          annotations=annotations)
    registrar.run(stop)
    server.stop()
    log.warning("fake AWS stopped")
    return 0


class _with_endpoint:
    """A boto3 Session whose clients all go to the fake."""

    def __init__(self, session, endpoint: str):
        self.session, self.endpoint = session, endpoint

    def client(self, service: str):
        return self.session.client(service, endpoint_url=self.endpoint)


# Not a user command: the aws-sim backend starts this module as its fake-AWS process
# (clusters/awssim/cluster.py, `-m karpenter_e2e.clusters.awssim.server`).
if __name__ == "__main__":
    sys.exit(main())
