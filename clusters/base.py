"""The small interface every mode implements, and what a running cluster tells the suites."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass
class ClusterInfo:
    """What the suites may know about the cluster under test, whatever the mode."""

    mode: str
    name: str
    kubeconfig: Path
    versions: dict[str, str] = field(default_factory=dict)  # kubernetes, karpenter, kwok, ...
    # The NodeClass kind the suites' factory renders: KWOKNodeClass locally, EC2NodeClass on EKS.
    nodeclass_group: str = "karpenter.kwok.sh"
    nodeclass_kind: str = "KWOKNodeClass"
    nodeclass_version: str = "v1alpha1"
    zones: tuple[str, ...] = ()  # zones Karpenter can launch into
    karpenter_log: Path | None = None  # where Karpenter's log can be read, when it is a file
    catalogue: Path | None = None  # the instance-types file Karpenter reads (local, kind)
    catalogue_selection: str | None = None  # which catalogue it holds (curated, full, ...)
    # Seconds from a NodeClaim's creation to its node Ready, at most, in this mode: pacing for
    # scenarios whose timers must outlast a launch (expiration). KWOK nodes are Ready in 1-2 s.
    node_launch_s: float = 15
    # Whether this mode's simulated nodes take the launch latency a NodePool's template asks
    # for (LAUNCH_LATENCY; local mode's kwok stages); elsewhere nodes launch at their own pace.
    launch_latency_simulated: bool = False
    # Where the boto3 checks reach EC2/SSM/SQS: None for AWS itself (eks), the fake's
    # endpoint in aws-sim mode.
    aws_endpoint: str | None = None
    region: str | None = None
    # Karpenter feature gates the harness itself turned on (FEATURE_GATES); empty where it
    # does not start Karpenter (eks: Helm's values decide) or sets none.
    feature_gates: tuple[str, ...] = ()
    # Karpenter's options and gates set for this run (KEY=VALUE), beyond the harness's own.
    karpenter_settings: dict[str, str] = field(default_factory=dict)


@dataclass
class Status:
    running: bool
    detail: str  # one line per component, for `status` and for error messages
    components: dict[str, bool] = field(default_factory=dict)


class Cluster(Protocol):
    """One backend per mode (local, aws-sim, kind, eks): what the plugin, the runners and
    ``check`` call on it. ``backends.create`` returns one, so mypy checks every backend
    against this. Mode-specific extras (a local catalogue, EC2 AMIs) are not part of it."""

    name: str
    context: str | None  # the kubeconfig context to use (eks); None: the kubeconfig's own

    @property
    def lock_path(self) -> Path: ...

    # Which run brought the cluster up (xdist workers of one run share it), or None.
    def owner(self) -> str | None: ...

    def set_owner(self, run_id: str) -> None: ...

    # Options that make no sense together stop the run before anything starts.
    def check_options(self) -> None: ...

    def up(self, reuse: bool = False) -> ClusterInfo: ...

    def down(self) -> None: ...

    def status(self) -> Status: ...

    def logs(self) -> dict[str, Path]: ...

    def render_nodeclass(self, name: str, labels: dict[str, str]) -> dict: ...

    def reap_orphan_nodes(self, selector: str) -> list[str]: ...

    # Nodes of ``selector`` Karpenter never registered, left when their NodeClaim went: where the
    # simulated cloud's Delete does not remove the instance, the harness does, as a cloud would.
    def end_unregistered_instances(self, selector: str) -> list[str]: ...

    # Teardown when Karpenter is gone: what the harness could remove itself ('Kind/name').
    def remove_without_karpenter(self, selector: str) -> list[str]: ...

    def karpenter_running(self) -> bool: ...

    # Why the cloud cannot answer (aws-sim: its fake AWS is gone), or None.
    def cloud_problem(self) -> str | None: ...

    # Karpenter's lifecycle, for negative checks and the upgrade gate.
    def stop_karpenter(self) -> None: ...

    def start_karpenter(self, version: str | None = None) -> None: ...

    def upgrade_karpenter(self, version: str) -> None: ...

    # Karpenter's Prometheus /metrics text, or None where this machine cannot reach it.
    def karpenter_metrics(self) -> str | None: ...

    def karpenter_peak_memory_mib(self) -> float | None: ...
