"""A node's hourly price: one policy for every mode.

The KWOK provider labels each node with its catalogue price (``PRICE``), and aws-sim's
registrar labels the nodes it makes; Karpenter's AWS provider on a real cluster sets no such
label. What the AWS provider does publish is the price it decides with, per offering, on its
/metrics page: ``karpenter_cloudprovider_instance_type_offering_price_estimate{instance_type,
capacity_type, zone}`` (aws/karpenter-provider-aws v1.15.0, pkg/controllers/metrics), set
once a minute from every NodePool's instance types. So a node's price is its label where the
provider set one, else that gauge for the node's instance type, capacity type and zone (its
labels), else unknown: None, never a made-up figure.

The label wins where both exist: it is the node's own, fixed at its launch, and the price
its provider's offerings carry (the KWOK catalogue is both); the gauge is per offering, the
last NodePool's when several price one differently, and already has NodeOverlays applied,
which the cost oracle applies to a label's price itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

from karpenter_e2e.clusters.api.labels import CAPACITY_TYPE, INSTANCE_TYPE, PRICE, ZONE
from karpenter_e2e.clusters.karpenter.promtext import parse, series_labels

METRIC = "karpenter_cloudprovider_instance_type_offering_price_estimate"
# The gauge's labels, in the order of a node's labels that give them (OFFERING_LABELS).
METRIC_LABELS = ("instance_type", "capacity_type", "zone")
OFFERING_LABELS = (INSTANCE_TYPE, CAPACITY_TYPE, ZONE)
# The provider's metrics controller sets the gauge every minute (RequeueAfter: time.Minute):
# an offering first priced after a NodePool appeared is on the page within this.
METRIC_PERIOD_S = 60.0
# A missing offering reads the page again at most this often (about 250 KB a read).
REREAD_S = 5.0

Offering = tuple[str, str, str]  # instance type, capacity type, zone


class PriceUnknown(LookupError):
    """No price for a node that an assertion needs one for: a harness error, not a verdict
    on Karpenter."""


def offering(labels: Mapping[str, str]) -> Offering | None:
    """The node's (instance type, capacity type, zone), or None when a label is missing."""
    values = tuple(labels.get(k) or "" for k in OFFERING_LABELS)
    return None if "" in values else (values[0], values[1], values[2])


def offering_prices(text: str) -> dict[Offering, float]:
    """Every offering's price estimate on a /metrics page."""
    out = {}
    for series, value in parse(text).items():
        if not series.startswith(METRIC + "{"):
            continue
        _, labels = series_labels(series)
        key = tuple(labels.get(k, "") for k in METRIC_LABELS)
        if "" not in key:
            out[(key[0], key[1], key[2])] = value
    return out


def describe(key: Offering) -> str:
    return METRIC + "{" + ",".join(f'{k}="{v}"' for k, v in zip(METRIC_LABELS, key, strict=True)) + "}"


class Prices:
    """Node prices by the policy above. ``metrics`` reads Karpenter's /metrics page (None
    when it does not answer); None as ``metrics`` itself: the labels are all there is."""

    def __init__(self, metrics: Callable[[], str | None] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.metrics, self.clock = metrics, clock
        self._table: dict[Offering, float] = {}
        self._read_at: float | None = None
        self._answered: bool | None = None  # whether the last read got a page
        self._lock = threading.Lock()  # the ledger and the recorder ask from their threads

    def of(self, labels: Mapping[str, str]) -> float | None:
        """The node's price per hour, by its labels; None when neither source has it."""
        label = labels.get(PRICE)
        if label:
            return float(label)
        key = offering(labels)
        if key is None or self.metrics is None:
            return None
        with self._lock:
            if key not in self._table and (self._read_at is None
                                           or self.clock() - self._read_at >= REREAD_S):
                self._read()
            return self._table.get(key)

    def _read(self) -> None:
        assert self.metrics is not None
        text = self.metrics()
        self._read_at, self._answered = self.clock(), text is not None
        if text is not None:
            self._table = offering_prices(text)

    def total(self, nodes_labels: Iterable[Mapping[str, str]]) -> float | None:
        """The nodes' price per hour, None when any one's is unknown (a report prints –)."""
        prices = [self.of(labels) for labels in nodes_labels]
        return None if None in prices else sum(p for p in prices if p is not None)

    def may_come(self, labels: Mapping[str, str]) -> bool:
        """Whether waiting can give the node a price: the page answered and the node's
        labels name an offering, which the provider's next round may publish."""
        return self.metrics is not None and bool(self._answered) and offering(labels) is not None

    def missing(self, labels: Mapping[str, str]) -> str:
        """Why ``of(labels)`` is None, naming what is missing."""
        no_label = f"no {PRICE} label (Karpenter's provider sets none here)"
        key = offering(labels)
        if key is None:
            lacks = ", ".join(k for k in OFFERING_LABELS if not labels.get(k))
            return f"{no_label}, and no {lacks} label to look its offering up by"
        if self.metrics is None:
            return f"{no_label}, and this mode has no Karpenter /metrics page to read {METRIC} from"
        if not self._answered:
            return f"{no_label}, and Karpenter's /metrics page did not answer (read for {METRIC})"
        return (f"{no_label}, and Karpenter's /metrics has no {describe(key)} "
                f"({len(self._table)} offerings priced there)")
