"""In which Karpenter release each feature the scenarios use appeared: the one table.

A scenario that needs one declares it (``@pytest.mark.karpenter_feature("node-overlay")``);
on an older release it is skipped with the reason this table gives (fixtures/plugin.py). A
scenario is skipped only where the release lacks the feature, never because it fails there.

``since`` is the first release *the Go module proxy serves* (v1.0.8 v1.1.5 v1.5.5 v1.6.4
v1.9.0 v1.10.0 v1.11.0-2 v1.12.0-1 v1.13.0 v1.14.0-3 v1.15.0 when this was written) whose
module tree has the feature; a feature can be older upstream (v1.2-v1.4 and v1.7-v1.8 are not
served, so "v1.5.5" means "somewhere after v1.1.5, by v1.5.5"). ``evidence`` is the file in
that release's module (``go mod download sigs.k8s.io/karpenter@<since>``, then
~/go/pkg/mod/sigs.k8s.io/karpenter@<since>/<file>) and what it shows, absent from the served
release before it. tests/test_features.py checks each against the module trees.

Also here: the feature gates each release knows and their defaults (its
pkg/operator/options/options.go), which local mode needs to set FEATURE_GATES for any release.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter_e2e.clusters.infra.versions import semver

OLDEST = "v1.0.8"  # the oldest served v1 release: a feature there is in every release we run
NODEPOOL_CRD = "pkg/apis/crds/karpenter.sh_nodepools.yaml"
OPTIONS = "pkg/operator/options/options.go"


@dataclass(frozen=True)
class Feature:
    name: str  # the marker's argument
    title: str
    since: str
    evidence: str  # "<file in the module tree>: <what it shows>"
    gate: str | None = None  # the feature gate that turns it on, where there is one


FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature("node-overlay", "NodeOverlay (karpenter.sh/v1alpha1)", "v1.9.0",
            "pkg/apis/crds/karpenter.sh_nodeoverlays.yaml: the NodeOverlay CRD; "
            f"{OPTIONS}: the NodeOverlay gate", gate="NodeOverlay"),
    Feature("capacity-buffer", "CapacityBuffer (autoscaling.x-k8s.io)", "v1.14.0",
            "pkg/apis/crds/autoscaling.x-k8s.io_capacitybuffers.yaml: the CapacityBuffer CRD; "
            f"{OPTIONS}: the CapacityBuffer gate", gate="CapacityBuffer"),
    Feature("static-capacity", "static capacity (NodePool spec.replicas)", "v1.9.0",
            f"{NODEPOOL_CRD}: spec.replicas; pkg/controllers/static/provisioning/controller.go; "
            f"{OPTIONS}: the StaticCapacity gate", gate="StaticCapacity"),
    Feature("node-limits", "NodePool node limit (spec.limits.nodes)", OLDEST,
            "pkg/controllers/nodepool/counter/controller.go: ResourceNode (\"nodes\") counted "
            "into status.resources, which the provisioner's Limits.ExceededBy checks "
            "(pkg/controllers/provisioning/provisioner.go); a static pool's replicas capped by "
            "it is static-capacity's, v1.9.0"),
    Feature("do-not-disrupt-duration", "karpenter.sh/do-not-disrupt with a duration value",
            "v1.12.0", "pkg/utils/pod/scheduling.go: parseDoNotDisrupt (time.ParseDuration of "
                       "the annotation); v1.11.2 accepts only \"true\""),
    Feature("balanced-consolidation", "consolidationPolicy Balanced", "v1.14.0",
            f"{NODEPOOL_CRD}: spec.disruption.consolidationPolicy enum has Balanced"),
    Feature("requirement-gte-lte", "requirement operators Gte and Lte", "v1.9.0",
            "pkg/apis/crds/karpenter.sh_nodepools.yaml: the requirements' operator enum has "
            "Gte and Lte (pkg/scheduling/requirement.go reads them as inclusive bounds)"),
    Feature("min-values-policy", "MIN_VALUES_POLICY (Strict / BestEffort)", "v1.6.4",
            f"{OPTIONS}: --min-values-policy / MIN_VALUES_POLICY"),
    Feature("spread-match-label-keys", "topologySpreadConstraints matchLabelKeys", "v1.5.5",
            "pkg/controllers/provisioning/scheduling/topology.go: newForTopologies adds each "
            "matchLabelKeys label's own value to the spread's selector"),
    Feature("spread-node-taints-policy", "topologySpreadConstraints nodeTaintsPolicy",
            "v1.5.5", "pkg/controllers/provisioning/scheduling/topologydomaingroup.go: "
                      "ForEachDomain leaves out, under nodeTaintsPolicy Honor, the domains of "
                      "pools whose taints the pod does not tolerate; v1.1.5 has no such file, "
                      "and its spreads take every pool's domains whatever the policy"),
    Feature("scheduler-config", "SCHEDULER_CONFIG (the kube-scheduler's default spread "
            "constraints)", "v1.15.0",
            f"{OPTIONS}: --scheduler-config / SCHEDULER_CONFIG; "
            "pkg/controllers/provisioning/scheduling/defaultconstraints.go: "
            "DefaultTopologySpreadInjector"),
    Feature("preference-policy", "PREFERENCE_POLICY (Respect / Ignore)", "v1.5.5",
            f"{OPTIONS}: --preference-policy / PREFERENCE_POLICY"),
    Feature("node-repair", "node repair (NodeRepair gate)", "v1.1.5",
            f"{OPTIONS}: the NodeRepair gate (default off); "
            "kwok/cloudprovider/cloudprovider.go: RepairPolicies (empty in v1.1.5, the Ready "
            "False/Unknown policies from v1.5.5)", gate="NodeRepair"),
    Feature("kwok-unhealthy-fault", "the KWOK provider's simulated fault (KWOKUnhealthy)",
            "v1.15.0", "kwok/cloudprovider/cloudprovider.go: KWOKUnhealthyCondition and its "
                       "RepairPolicy (toleration 30s)"),
    Feature("optional-consolidate-after", "spec.disruption without consolidateAfter",
            "v1.15.0", f"{NODEPOOL_CRD}: spec.disruption has no required: [consolidateAfter] "
                       "(consolidateAfter defaults to 0s); up to v1.14.3 it is required"),
    Feature("kwok-offering-labels",
            "labels on the KWOK catalogue's offerings (the fake karpenter.k8s.aws/* labels)",
            "v1.5.5", "kwok/cloudprovider/helpers.go: each offering requirement's key is added "
                      "to v1.WellKnownLabels, and kwok/cloudprovider/cloudprovider.go's "
                      "addInstanceLabels puts the offering's requirements on the node; up to "
                      "v1.1.5 an offering gives only its zone and capacity type"),
    Feature("template-kubernetes-io-labels",
            "kubernetes.io / k8s.io domain labels on the NodePool template", "v1.9.0",
            f"{NODEPOOL_CRD}: spec.template.metadata.labels without the rules 'label domain "
            "\"kubernetes.io\" is restricted' and '... \"k8s.io\" ...' (v1.6.4 has them)"),
    Feature("budget-reasons", "disruption budgets with reasons", OLDEST,
            f"{NODEPOOL_CRD}: spec.disruption.budgets[].reasons"),
    Feature("termination-grace-period", "terminationGracePeriod", OLDEST,
            f"{NODEPOOL_CRD}: spec.template.spec.terminationGracePeriod"),
    Feature("template-expire-after", "expireAfter on the NodePool template", OLDEST,
            f"{NODEPOOL_CRD}: spec.template.spec.expireAfter"),
    Feature("terminate-first-drift", "TerminateFirstDrift: a static pool at its node limit "
            "deletes a drifted node before replacing it", "v1.15.0",
            "pkg/controllers/disruption/staticdrift.go: unreplaceableCommands (delete-only "
            "commands under the TerminateFirstDrift gate)", gate="TerminateFirstDrift"),
    Feature("spread-node-affinity-policy", "topologySpreadConstraints nodeAffinityPolicy",
            "v1.5.5", "pkg/controllers/provisioning/scheduling/topology.go: the spread's "
            "NodeAffinityPolicy passed to NewTopologyGroup"),
    Feature("terminate-first-repair", "TerminateFirstRepair: a static pool at its node limit "
            "deletes an unhealthy node before replacing it", "v1.15.0",
            "pkg/controllers/disruption/repair.go: the TerminateFirstRepair gate read for "
            "static pools at their limit", gate="TerminateFirstRepair"),
    Feature("pod-deletion-cost", "PodDeletionCostManagement: pod-deletion-cost by Karpenter's "
            "disruption order", "v1.15.0",
            "pkg/controllers/pod/deletioncost/controller.go: the pod.deletioncost controller "
            "(under the PodDeletionCostManagement gate)", gate="PodDeletionCostManagement"),
    Feature("spot-to-spot-consolidation", "spot-to-spot consolidation", OLDEST,
            f"{OPTIONS}: the SpotToSpotConsolidation gate (default off)",
            gate="SpotToSpotConsolidation"),
)}


@dataclass(frozen=True)
class Gate:
    name: str
    since: str
    # (from release, default) in order: the default from that release on
    defaults: tuple[tuple[str, bool], ...]


# Each release's gates and defaults, from its pkg/operator/options/options.go (the
# FEATURE_GATES default string up to v1.14.3; the FeatureGate declarations in v1.15.0).
GATES: dict[str, Gate] = {g.name: g for g in (
    Gate("SpotToSpotConsolidation", "v1.0.8", (("v1.0.8", False),)),
    Gate("NodeRepair", "v1.1.5", (("v1.1.5", False),)),
    Gate("ReservedCapacity", "v1.5.5", (("v1.5.5", False), ("v1.6.4", True))),
    Gate("NodeOverlay", "v1.9.0", (("v1.9.0", False),)),
    Gate("StaticCapacity", "v1.9.0", (("v1.9.0", False),)),
    Gate("CapacityBuffer", "v1.14.0", (("v1.14.0", False),)),
    Gate("TerminateFirstDrift", "v1.15.0", (("v1.15.0", False),)),
    Gate("TerminateFirstRepair", "v1.15.0", (("v1.15.0", False),)),
    Gate("PodDeletionCostManagement", "v1.15.0", (("v1.15.0", False),)),
)}


class UnknownFeature(ValueError):
    pass


def feature(name: str) -> Feature:
    try:
        return FEATURES[name]
    except KeyError:
        raise UnknownFeature(f"unknown Karpenter feature {name!r}; the table "
                             "(clusters/karpenter/features.py) has "
                             f"{', '.join(sorted(FEATURES))}") from None


def has(version: str, name: str) -> bool:
    return semver(version) >= semver(feature(name).since)


def missing(version: str, name: str) -> str | None:
    """Why Karpenter ``version`` cannot run a scenario needing ``name``, or None if it can."""
    f = feature(name)
    if has(version, name):
        return None
    return (f"Karpenter {version} lacks {f.title}: it appeared in {f.since} "
            f"(first served release with {f.evidence})")


def gates_known(version: str) -> list[str]:
    return [g.name for g in GATES.values() if semver(version) >= semver(g.since)]


def gate_default(version: str, gate: str) -> bool:
    value = False
    for since, default in GATES[gate].defaults:
        if semver(version) >= semver(since):
            value = default
    return value


def gate_settings(version: str, wanted: tuple[str, ...],
                  off: tuple[str, ...] = ()) -> dict[str, bool]:
    """Every gate ``version`` knows, at its default, with the ``wanted`` ones on. Naming all
    of them keeps each release at its own defaults: in v1.0.8 to v1.5.5 an explicit
    FEATURE_GATES turns off every gate it does not name. A wanted gate the release does not
    know is left out (it would be ignored anyway)."""
    return {g: ((g in wanted) or gate_default(version, g)) and g not in off
            for g in gates_known(version)}


def feature_gates_env(version: str, wanted: tuple[str, ...], off: tuple[str, ...] = ()) -> str:
    return ",".join(f"{g}={str(on).lower()}"
                    for g, on in gate_settings(version, wanted, off).items())


# ---- behaviour changes: what a release decides differently for the same workload ----------------
@dataclass(frozen=True)
class Change:
    """A release that decides differently for workloads that use no new feature: the
    differential (fixtures/decisions.py) counts a difference in one of ``fields`` between two
    releases that straddle ``since`` as expected, citing ``ref`` (Karpenter's code). Each was
    found by the behaviour matrix and bisected (docs/matrix.md, docs/findings.md)."""

    since: str
    fields: tuple[str, ...]  # decision record fields it changes
    title: str
    ref: str
    # what the workload must use for the change to touch it (a decision record's traits,
    # fixtures/decisions.py traits()); "" when the harness cannot tell, so it always may
    needs: str = ""


_SIZING = ("nodeclaims", "instance_types", "requests", "cost_per_hour")
CHANGES: tuple[Change, ...] = (
    Change("v1.9.0", ("nodeclaims", "pending", "to_running_s"),
           "a pod whose PVC the PV controller has not bound waits for the binding",
           "pkg/controllers/provisioning/scheduling/volumetopology.go: pv.kubernetes.io/bind-completed"),
    Change("v1.11.0", ("nodeclaims", "pending"),
           "limits.nodes held when pods arrive together",
           "pkg/controllers/provisioning/provisioner.go: the node limit in the round",
           needs="node-limits"),
    Change("v1.11.0", (*_SIZING, "pending", "zones"),
           "a spread's domains only from the NodePools the pod can select (reverted in v1.11.1)",
           "v1.11.0 pkg/controllers/provisioning/scheduling/topologydomaingroup.go: DomainSource"),
    Change("v1.11.1", (*_SIZING, "pending", "zones"),
           "a spread's domains from every NodePool again, filtered by taints",
           "pkg/controllers/provisioning/scheduling/topologydomaingroup.go"),
    Change("v1.12.1", ("zones", "nodeclaims", "pending"),
           "a StorageClass's allowedTopologies read in full, not its first term",
           "pkg/controllers/provisioning/scheduling/volumetopology.go: AllowedTopologies"),
    Change("v1.14.0", _SIZING,
           "DaemonSet overhead per instance-type group: a DaemonSet counted only where it can run "
           "(arch, selectors on karpenter.sh/registered and initialized)",
           "pkg/controllers/provisioning/scheduling/scheduler.go: buildDaemonOverheadGroups; "
           "pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go", needs="daemonsets"),
    Change("v1.14.1", (*_SIZING, "capacity_types", "zones", "rounds"),
           "a CapacityBuffer's virtual pods carry its pod template's labels, so an affinity, "
           "anti-affinity or spread on them applies (v1.14.0 gave them only the buffer's own "
           "labels: three spare pods, one per node by anti-affinity, were packed on one node)",
           "pkg/state/virtualpods/utilities.go: BuildVirtualPods (Labels: spec.Labels); "
           "v1.14.0 pkg/controllers/provisioning/buffers.go: buildVirtualPods",
           needs="capacity-buffers"),
    Change("v1.14.1", ("disruptions",),
           "Balanced's EstimatedSavings prices a replacement only at offerings it may launch",
           "pkg/controllers/disruption/types.go: EstimatedSavings (used by balanced.go)",
           needs="balanced"),
    Change("v1.15.0", ("disruptions",),
           "a NodePool's consolidateAfter defaults to 0s when its disruption block omits it",
           f"{NODEPOOL_CRD}: spec.disruption.consolidateAfter default",
           needs="consolidate-after-omitted"),
)
