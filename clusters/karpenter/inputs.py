"""Every input Karpenter decides on: the inventory the coverage table is built from.

One entry per input that changes a Karpenter decision (what it launches, where, how big,
what it disrupts, when), read from the pinned module (``sigs.k8s.io/karpenter@v1.15.0``;
two entries from ``github.com/aws/karpenter-provider-aws``). ``where`` names the files and
functions that read it, as ``<path in the module>:<Func>`` or ``<path>:<Type.Method>``
(tests/test_coverage.py finds each in the module trees present in the Go module cache).

Scenarios say which inputs they cover with ``@pytest.mark.covers("pod.hostPorts", ...)``;
``karpenter-e2e pages`` writes docs/coverage.md from this table, the
markers and the mutants' headers. An input carries:

- ``proved_by``: the mutants (mutants/*.patch) whose ``# regression:`` line is about this
  input. That is a reader's judgement of the line, kept here; the generator checks that each
  one names a scenario covering the input;
- ``gap``: what the covering scenarios leave out of the input, where they cover only part;
- ``kwok``: for an input no simulated (KWOK) node can show, why not; ``eks``: what only eks
  mode (real instances, kubelets and drivers) can show of it.

Pure data: no pytest, no cluster (the layers' contract for ``clusters``).

Long because it is a table: one entry per input Karpenter decides on (97), each with where
Karpenter reads it; a table split by size would split the inventory the coverage page is
built from.
"""

from __future__ import annotations

from dataclasses import dataclass

CORE = "sigs.k8s.io/karpenter"
AWS_PROVIDER = "github.com/aws/karpenter-provider-aws"
VERSIONS = {CORE: "v1.15.0", AWS_PROVIDER: "v1.15.0"}  # the pinned modules read

GROUPS = {
    "pod": "The pod spec",
    "pdb": "PodDisruptionBudgets",
    "daemonset": "DaemonSets (the overhead of every node they would run on)",
    "nodepool": "NodePool fields",
    "node": "The Node and NodeClaim",
    "volume": "Volumes",
    "overlay": "NodeOverlays",
    "options": "Karpenter's options and feature gates",
    "provider": "The AWS provider (eks and aws-sim modes)",
}

SCHED = "pkg/controllers/provisioning/scheduling"
DISRUPTION = "pkg/controllers/disruption"
OPTIONS = "pkg/operator/options/options.go"


@dataclass(frozen=True)
class Input:
    id: str
    group: str
    what: str
    where: tuple[str, ...]
    module: str = CORE
    proved_by: tuple[str, ...] = ()
    gap: str | None = None
    kwok: str | None = None
    eks: str | None = None


def _i(id: str, group: str, what: str, *where: str, module: str = CORE,
       proved_by: tuple[str, ...] = (), gap: str | None = None, kwok: str | None = None,
       eks: str | None = None) -> Input:
    return Input(id, group, what, where, module, proved_by, gap, kwok, eks)


INPUTS: tuple[Input, ...] = (
    # --- the pod spec -------------------------------------------------------------------
    _i("pod.requests", "pod",
       "cpu and memory requests: the instance types a pod fits and the size Karpenter picks",
       "pkg/utils/resources/resources.go:RequestsForPods",
       f"{SCHED}/nodeclaim.go:filterInstanceTypesByRequirements"),
    _i("pod.requests.ephemeral-storage", "pod",
       "ephemeral-storage requests, fitted against each type's ephemeral-storage capacity",
       "pkg/utils/resources/resources.go:Fits",
       f"{SCHED}/nodeclaim.go:filterInstanceTypesByRequirements",
       proved_by=("ephemeral-storage-not-fitted",),
       gap="local mode's catalogue gives every type 20Gi, so a request decides how many pods "
           "share a NodeClaim and whether any type fits, never which type; capacity that "
           "follows the EC2NodeClass's block devices (or instance stores) needs aws-sim or "
           "eks"),
    _i("pod.requests.extended", "pod",
       "extended resources (nvidia.com/gpu, a resource a NodeOverlay adds): only types "
       "offering them fit",
       "pkg/utils/resources/resources.go:Fits",
       f"{SCHED}/nodeclaim.go:filterInstanceTypesByRequirements",
       proved_by=("gpu-resource-ignored",)),
    _i("pod.initContainers", "pod",
       "init containers: a pod needs the larger of its biggest init container and its "
       "containers' sum (Karpenter's Ceiling, the kube-scheduler's rule)",
       "pkg/utils/resources/resources.go:Ceiling",
       f"{SCHED}/scheduler.go:Scheduler.updateCachedPodData",
       proved_by=("init-container-requests-ignored",)),
    _i("pod.sidecarContainers", "pod",
       "sidecar containers (init containers with restartPolicy Always): their requests add "
       "to the containers' for the pod's whole life",
       "pkg/utils/resources/resources.go:Ceiling",
       proved_by=("sidecars-as-init-containers",)),
    _i("pod.overhead", "pod",
       "pod overhead set from a RuntimeClass at admission: added to the pod's requests",
       "pkg/utils/resources/resources.go:Ceiling",
       proved_by=("pod-overhead-ignored",)),
    _i("pod.hostPorts", "pod",
       "hostPorts: two pods (or a pod and a DaemonSet) using one port cannot share a node",
       "pkg/scheduling/hostportusage.go:GetHostPorts",
       "pkg/scheduling/hostportusage.go:HostPortUsage.Conflicts",
       f"{SCHED}/existingnode.go:ExistingNode.CanAdd",
       f"{SCHED}/nodeclaim.go:filterInstanceTypesByRequirements",
       proved_by=("host-port-conflicts-ignored",)),
    _i("pod.nodeSelector", "pod",
       "nodeSelector: each label a requirement on the NodeClaim (pool, arch, zone, ...)",
       "pkg/scheduling/requirements.go:newPodRequirements",
       proved_by=("arch-ignored",)),
    _i("pod.nodeAffinity.required", "pod",
       "required node affinity: the first term is tried, then the next (terms are ORed)",
       "pkg/scheduling/requirements.go:newPodRequirements",
       f"{SCHED}/preferences.go:Preferences.removeRequiredNodeAffinityTerm",
       proved_by=("required-terms-not-relaxed",)),
    _i("pod.nodeAffinity.preferred", "pod",
       "preferred node affinity: the heaviest term is treated as required, then relaxed "
       "away if nothing fits",
       "pkg/scheduling/requirements.go:newPodRequirements",
       f"{SCHED}/preferences.go:Preferences.removePreferredNodeAffinityTerm",
       proved_by=("preferred-lightest-first",)),
    _i("pod.podAffinity.required", "pod",
       "required pod affinity: only domains that already hold a matching pod",
       f"{SCHED}/topology.go:Topology.newForAffinities",
       f"{SCHED}/topologygroup.go:TopologyGroup.nextDomainAffinity",
       proved_by=("pod-affinity-ignored",)),
    _i("pod.podAffinity.preferred", "pod",
       "preferred pod affinity: kept as a constraint, relaxed away if nothing fits",
       f"{SCHED}/preferences.go:Preferences.removePreferredPodAffinityTerm",
       proved_by=("preferred-pod-affinity-dropped",)),
    _i("pod.podAntiAffinity.required", "pod",
       "required pod anti-affinity: no domain holding a matching pod (and the inverse: "
       "existing pods' anti-affinity keeps new pods away)",
       f"{SCHED}/topology.go:Topology.updateInverseAntiAffinity",
       f"{SCHED}/topologygroup.go:TopologyGroup.nextDomainAntiAffinity",
       proved_by=("anti-affinity-ignored",)),
    _i("pod.podAntiAffinity.preferred", "pod",
       "preferred pod anti-affinity: kept as a constraint, relaxed away if nothing fits "
       "(and, with PREFERENCE_POLICY Respect, it makes the pod count in inverse anti-affinity)",
       f"{SCHED}/preferences.go:Preferences.removePreferredPodAntiAffinityTerm",
       f"{SCHED}/topology.go:Topology.Update",
       proved_by=("preferred-anti-affinity-dropped",)),
    _i("pod.topologySpread.maxSkew", "pod",
       "topologySpreadConstraints maxSkew: how uneven the domains may get",
       f"{SCHED}/topology.go:Topology.newForTopologies",
       f"{SCHED}/topologygroup.go:TopologyGroup.nextDomainTopologySpread",
       proved_by=("topology-spread-ignored",)),
    _i("pod.topologySpread.topologyKey", "pod",
       "topologySpreadConstraints topologyKey: the domains (zone, hostname, or a label a "
       "NodePool's requirements define, such as capacity-spread)",
       f"{SCHED}/topology.go:Topology.countDomains",
       f"{SCHED}/topology.go:buildDomainGroups"),
    _i("pod.topologySpread.minDomains", "pod",
       "topologySpreadConstraints minDomains: fewer domains than this count as a global "
       "minimum of 0",
       f"{SCHED}/topologygroup.go:TopologyGroup.domainMinCount",
       proved_by=("min-domains-ignored",)),
    _i("pod.topologySpread.whenUnsatisfiable", "pod",
       "topologySpreadConstraints whenUnsatisfiable: ScheduleAnyway is a preference Karpenter "
       "relaxes away (and ignores under PREFERENCE_POLICY Ignore); DoNotSchedule is kept",
       f"{SCHED}/preferences.go:Preferences.removeTopologySpreadScheduleAnyway",
       f"{SCHED}/topology.go:Topology.newForTopologies",
       proved_by=("schedule-anyway-never-relaxed",)),
    _i("pod.topologySpread.nodeAffinityPolicy", "pod",
       "topologySpreadConstraints nodeAffinityPolicy: whether matching pods on nodes the "
       "pod's node selector and affinity exclude count toward a domain",
       f"{SCHED}/topologygroup.go:NewTopologyGroup",
       f"{SCHED}/topologynodefilter.go:MakeTopologyNodeFilter",
       proved_by=("node-affinity-policy-ignored",)),
    _i("pod.topologySpread.nodeTaintsPolicy", "pod",
       "topologySpreadConstraints nodeTaintsPolicy: whether domains of nodes whose taints the "
       "pod does not tolerate count (a spread's domains are every NodePool's; under Honor a "
       "pool's count only if the pod tolerates its taints)",
       f"{SCHED}/topologygroup.go:NewTopologyGroup",
       f"{SCHED}/topologydomaingroup.go:TopologyDomainGroup.ForEachDomain",
       f"{SCHED}/topologynodefilter.go:TopologyNodeFilter.Matches",
       proved_by=("node-taints-policy-ignored",),
       gap="only the domains a pool's taints exclude: pods already running on a tainted node "
           "and counted or not by the policy (TopologyNodeFilter.Matches) are not set up"),
    _i("pod.topologySpread.matchLabelKeys", "pod",
       "topologySpreadConstraints matchLabelKeys: the pod's own values of these labels join "
       "the selector (one spread per ReplicaSet revision)",
       f"{SCHED}/topology.go:Topology.newForTopologies",
       proved_by=("match-label-keys-ignored",)),
    _i("pod.tolerations.NoSchedule", "pod",
       "tolerations of a NoSchedule taint: a pool's tainted nodes take only pods that "
       "tolerate it",
       "pkg/scheduling/taints.go:Taints.Tolerates",
       f"{SCHED}/nodeclaim.go:NodeClaim.CanAdd",
       proved_by=("taints-ignored",)),
    _i("pod.tolerations.NoExecute", "pod",
       "tolerations of a NoExecute taint: needed to be placed, like NoSchedule (and a node "
       "tainted NoExecute after launch evicts its pods)",
       "pkg/scheduling/taints.go:Taints.Tolerates",
       f"{SCHED}/existingnode.go:ExistingNode.CanAdd",
       gap="only placement: a node tainted NoExecute after launch evicting its pods is the "
           "kube-controller-manager's taint eviction, which no scenario triggers",
       proved_by=("no-execute-taints-tolerated",)),
    _i("pod.tolerations.PreferNoSchedule", "pod",
       "PreferNoSchedule taints: honoured first, then tolerated by relaxation when a pool "
       "carries one",
       f"{SCHED}/preferences.go:Preferences.toleratePreferNoScheduleTaints",
       f"{SCHED}/scheduler.go:NewScheduler",
       proved_by=("prefer-no-schedule-ignored", "prefer-no-schedule-never-relaxed")),
    _i("pod.priority", "pod",
       "priority: a pod nominated by preemption is left to the kube-scheduler, and "
       "system-cluster/node-critical pods are drained last",
       "pkg/utils/pod/scheduling.go:IsProvisionable",
       "pkg/controllers/node/termination/terminator/terminator.go:Terminator.groupPodsByPriority",
       kwok="KWOK ends a preempted pod at once (a finalizer leaves it Terminating but frees "
            "its CPU), so kube-scheduler binds the preempting pod within Karpenter's 1 s batch "
            "idle; a scenario written for it let a mutant that provisions for preempting pods "
            "survive (tried 2026-12-02)",
       eks="a preempting pod nominated to a node whose victims take their grace period: "
           "Karpenter launches nothing for it; critical pods drained after the others"),
    _i("pod.owner", "pod",
       "the pod's owner: DaemonSet and node-owned (mirror) pods are not provisioned for; "
       "Job and Deployment pods are",
       "pkg/utils/pod/scheduling.go:IsProvisionable",
       proved_by=("job-pods-ignored",)),
    _i("pod.doNotDisrupt", "pod",
       "the karpenter.sh/do-not-disrupt: \"true\" annotation on a pod: its node is not "
       "voluntarily disrupted, nor the pod evicted",
       "pkg/utils/pod/scheduling.go:IsDoNotDisruptActive",
       "pkg/controllers/state/statenode.go:StateNode.ValidatePodsDisruptable",
       proved_by=("do-not-disrupt-ignored",)),
    _i("pod.doNotDisrupt.duration", "pod",
       "karpenter.sh/do-not-disrupt with a duration (\"60s\"): protection until the pod is "
       "that old",
       "pkg/utils/pod/scheduling.go:parseDoNotDisrupt",
       "pkg/utils/pod/scheduling.go:IsDoNotDisruptActive",
       proved_by=("do-not-disrupt-duration-forever",)),
    # --- PodDisruptionBudgets ------------------------------------------------------------
    _i("pdb.budget", "pdb",
       "a PDB's minAvailable/maxUnavailable: a node whose pods it forbids evicting is no "
       "disruption candidate, and the drain waits on it",
       "pkg/utils/pdb/pdb.go:Limits.CanEvictPods",
       "pkg/controllers/state/statenode.go:StateNode.ValidatePodsDisruptable",
       "pkg/controllers/node/termination/terminator/eviction.go:Queue.evict",
       proved_by=("pdb-ignored", "eviction-pdb-bypassed")),
    _i("pdb.unhealthyPodEvictionPolicy", "pdb",
       "a PDB's unhealthyPodEvictionPolicy AlwaysAllow: not-Ready pods stay evictable",
       "pkg/utils/pdb/pdb.go:newPdb",
       proved_by=("pdb-unhealthy-policy-ignored",)),
    # --- DaemonSets ----------------------------------------------------------------------
    _i("daemonset.overhead", "daemonset",
       "a DaemonSet's pod requests, added to every new node it would run on",
       f"{SCHED}/scheduler.go:buildDaemonOverheadGroups",
       f"{SCHED}/nodeclaim.go:NodeClaim.addDaemonRequests",
       proved_by=("daemonset-overhead-ignored",)),
    _i("daemonset.nodeSelector", "daemonset",
       "a DaemonSet's nodeSelector: counted only on pools whose labels it selects (a label "
       "the pool does not define excludes it, as another value of one it does)",
       f"{SCHED}/scheduler.go:isDaemonPodCompatible",
       proved_by=("daemonset-undefined-labels-allowed",)),
    _i("daemonset.requiredTerms", "daemonset",
       "a DaemonSet's required node affinity with several terms: compatible if any term is "
       "(Karpenter takes the DaemonSet's template affinity, not the pod's per-node one)",
       f"{SCHED}/scheduler.go:isDaemonPodCompatible",
       "pkg/controllers/provisioning/provisioner.go:Provisioner.getDaemonSetPods",
       proved_by=("daemonset-first-term-only",),
       gap="terms that match different pools or instance types: removeRequiredNodeAffinityTerm "
           "drops a failed term from the daemon pod itself, which the whole scheduling round "
           "shares, so a term one pool or type failed is not tried for the next (read, not "
           "run); the scenario's matching term is the last, which is never dropped"),
    _i("daemonset.preferredTerms", "daemonset",
       "a DaemonSet's preferred node affinity: ignored for compatibility (strict "
       "requirements only)",
       f"{SCHED}/scheduler.go:isDaemonPodCompatible",
       "pkg/scheduling/requirements.go:NewStrictPodRequirements",
       proved_by=("daemonset-preferred-as-required",)),
    _i("daemonset.karpenterLabels", "daemonset",
       "a DaemonSet selecting labels Karpenter sets at registration (karpenter.sh/registered, "
       "karpenter.sh/initialized): counted, as the template carries them as requirements",
       f"{SCHED}/nodeclaimtemplate.go:NewNodeClaimTemplate",
       proved_by=("daemonset-karpenter-labels-dropped",)),
    _i("daemonset.arch", "daemonset",
       "an arch-specific DaemonSet (kubernetes.io/arch): counted per instance type, only on "
       "types of its arch",
       f"{SCHED}/scheduler.go:buildDaemonOverheadGroups",
       f"{SCHED}/scheduler.go:isDaemonPodCompatible",
       proved_by=("daemonset-arch-ignored",)),
    _i("daemonset.tolerations", "daemonset",
       "a DaemonSet's tolerations against the pool's taints: counted only where it tolerates",
       f"{SCHED}/scheduler.go:isDaemonPodCompatible",
       proved_by=("daemonset-tolerations-ignored",)),
    # --- NodePool fields -----------------------------------------------------------------
    _i("nodepool.template.labels", "nodepool",
       "template metadata.labels: on every NodeClaim and node, and requirements pods select",
       f"{SCHED}/nodeclaimtemplate.go:NewNodeClaimTemplate",
       "pkg/apis/v1/nodepool.go:NodeClaimTemplate.ToNodeClaim",
       proved_by=("template-labels-dropped",)),
    _i("nodepool.template.annotations", "nodepool",
       "template metadata.annotations: copied to NodeClaims; a change drifts them (the "
       "template hash)",
       "pkg/apis/v1/nodepool.go:NodeClaimTemplate.ToNodeClaim",
       "pkg/apis/v1/nodepool.go:NodePool.Hash",
       proved_by=("template-annotations-unhashed",)),
    _i("nodepool.template.taints", "nodepool",
       "template taints: only tolerating pods are planned onto the pool's NodeClaims; "
       "synced onto the node at registration",
       f"{SCHED}/nodeclaim.go:NodeClaim.CanAdd",
       "pkg/controllers/nodeclaim/lifecycle/registration.go:Registration.syncNode",
       proved_by=("taints-ignored", "template-taints-dropped")),
    _i("nodepool.template.startupTaints", "nodepool",
       "template startupTaints: ignored for scheduling, put on the node at registration; "
       "the NodeClaim is Initialized only once they are gone",
       "pkg/controllers/nodeclaim/lifecycle/registration.go:Registration.syncNode",
       "pkg/controllers/nodeclaim/lifecycle/initialization.go:StartupTaintsRemoved",
       "pkg/controllers/state/statenode.go:StateNode.Taints",
       proved_by=("startup-taints-kept-in-simulation", "initialized-with-startup-taints")),
    _i("nodepool.template.nodeClassRef", "nodepool",
       "template nodeClassRef: which NodeClass launches; a change drifts the pool's "
       "NodeClaims (the template hash)",
       "pkg/apis/v1/nodepool.go:NodePool.Hash",
       "pkg/controllers/nodeclaim/disruption/drift.go:areStaticFieldsDrifted",
       proved_by=("template-drift-never", "drift-replace-without-launch")),
    _i("nodepool.template.drift", "nodepool",
       "a change to any field of the hashed template (labels, annotations, taints, "
       "startupTaints, nodeClassRef, expireAfter, terminationGracePeriod) drifts the pool's "
       "NodeClaims (Drifted, reason NodePoolDrifted); changed back, Drifted is cleared",
       "pkg/apis/v1/nodepool.go:NodePool.Hash",
       "pkg/controllers/nodepool/hash/controller.go:Controller.Reconcile",
       "pkg/controllers/nodeclaim/disruption/drift.go:areStaticFieldsDrifted",
       "pkg/controllers/nodeclaim/disruption/drift.go:Drift.Reconcile",
       proved_by=("drifted-never-cleared",)),
    _i("nodepool.requirements.In", "nodepool",
       "a requirement with operator In (zone, capacity type, category, a custom label)",
       "pkg/scheduling/requirement.go:NewRequirementWithFlexibility",
       f"{SCHED}/nodeclaimtemplate.go:NewNodeClaimTemplate",
       proved_by=("zone-ignored", "capacity-type-ignored")),
    _i("nodepool.requirements.NotIn", "nodepool",
       "a requirement with operator NotIn",
       "pkg/scheduling/requirement.go:NewRequirementWithFlexibility",
       proved_by=("notin-ignored",)),
    _i("nodepool.requirements.Exists", "nodepool",
       "a requirement with operator Exists (instance-gpu-count Exists): only types carrying the "
       "label",
       "pkg/scheduling/requirement.go:NewRequirementWithFlexibility",
       proved_by=("exists-as-does-not-exist",)),
    _i("nodepool.requirements.DoesNotExist", "nodepool",
       "a requirement with operator DoesNotExist (instance-gpu-count DoesNotExist): only types "
       "without the label",
       "pkg/scheduling/requirement.go:NewRequirementWithFlexibility",
       proved_by=("does-not-exist-as-exists",)),
    _i("nodepool.requirements.Gt", "nodepool",
       "a requirement with operator Gt (instance-generation Gt 6): exclusive, canonicalised "
       "to an inclusive bound N+1",
       "pkg/scheduling/requirement.go:NewRequirementWithFlexibility",
       proved_by=("gt-inclusive",)),
    _i("nodepool.requirements.Lt", "nodepool",
       "a requirement with operator Lt (instance-cpu Lt 4): exclusive, canonicalised to an "
       "inclusive bound N-1",
       "pkg/scheduling/requirement.go:NewRequirementWithFlexibility",
       proved_by=("lt-inclusive",)),
    _i("nodepool.requirements.Gte", "nodepool",
       "a requirement with operator Gte",
       "pkg/scheduling/requirement.go:NewRequirementWithFlexibility",
       proved_by=("gte-read-as-gt",)),
    _i("nodepool.requirements.Lte", "nodepool",
       "a requirement with operator Lte",
       "pkg/scheduling/requirement.go:NewRequirementWithFlexibility",
       proved_by=("lte-read-as-lt",)),
    _i("nodepool.requirements.minValues", "nodepool",
       "a requirement's minValues: every NodeClaim keeps at least that many values",
       f"{SCHED}/nodeclaim.go:filterInstanceTypesByRequirements",
       proved_by=("min-values-ignored",)),
    _i("nodepool.requirements.drift", "nodepool",
       "a requirements change: a NodeClaim whose labels no longer meet the pool's requirements "
       "is Drifted (reason RequirementsDrifted), one whose labels still do is not "
       "(requirements are outside the template hash, hash:\"ignore\")",
       "pkg/controllers/nodeclaim/disruption/drift.go:areRequirementsDrifted",
       "pkg/controllers/nodeclaim/disruption/drift.go:Drift.isDrifted",
       proved_by=("requirements-drift-never",)),
    _i("nodepool.crdRules", "nodepool",
       "the NodePool CRD's validation (OpenAPI and CEL rules): restricted keys and labels, "
       "In without values, negative durations, minValues bounds",
       "pkg/apis/crds/karpenter.sh_nodepools.yaml",
       proved_by=("nodepool-crd-rules-dropped",)),
    _i("nodepool.limits.cpu", "nodepool",
       "limits.cpu: no launch whose type would take the pool past it",
       f"{SCHED}/scheduler.go:Scheduler.addToNewNodeClaim",
       f"{SCHED}/scheduler.go:filterByRemainingResources",
       proved_by=("limits-exhaustion-ignored",)),
    _i("nodepool.limits.memory", "nodepool",
       "limits.memory (and any other resource limit): as limits.cpu",
       f"{SCHED}/scheduler.go:filterByRemainingResources",
       proved_by=("memory-limit-ignored", "limits-ignored")),
    _i("nodepool.limits.nodes", "nodepool",
       "limits.nodes on a dynamic pool: no NodeClaim once the pool holds that many nodes",
       f"{SCHED}/scheduler.go:Scheduler.addToNewNodeClaim",
       "pkg/controllers/nodepool/counter/controller.go:Controller.Reconcile",
       proved_by=("node-limit-off-by-one",)),
    _i("nodepool.limits.nodes.static", "nodepool",
       "limits.nodes on a static pool (spec.replicas): replicas cut to the limit, also for "
       "repair and drift replacements",
       "pkg/controllers/static/provisioning/controller.go:Controller.Reconcile",
       f"{DISRUPTION}/staticdrift.go:StaticDrift.ComputeCommands",
       proved_by=("static-node-limit-ignored", "static-drift-limit-ignored",
                  "static-repair-limit-ignored")),
    _i("nodepool.replicas", "nodepool",
       "spec.replicas: a static pool's node count, with no pod asking",
       "pkg/controllers/static/provisioning/controller.go:Controller.Reconcile",
       "pkg/controllers/static/deprovisioning/controller.go:Controller.Reconcile"),
    _i("nodepool.weight", "nodepool",
       "weight: pools are tried in descending weight",
       "pkg/utils/nodepool/nodepool.go:OrderByWeight",
       proved_by=("weight-order-reversed",)),
    _i("nodepool.consolidationPolicy.WhenEmpty", "nodepool",
       "consolidationPolicy WhenEmpty: empty nodes are consolidated, underused ones are not",
       f"{DISRUPTION}/consolidation.go:consolidation.ShouldDisrupt",
       f"{DISRUPTION}/emptiness.go:Emptiness.ShouldDisrupt",
       gap="only the empty half: no scenario checks that WhenEmpty keeps an underused node"),
    _i("nodepool.consolidationPolicy.WhenEmptyOrUnderutilized", "nodepool",
       "consolidationPolicy WhenEmptyOrUnderutilized: underused nodes are deleted or "
       "replaced by cheaper ones",
       f"{DISRUPTION}/consolidation.go:consolidation.computeConsolidation",
       f"{DISRUPTION}/singlenodeconsolidation.go:SingleNodeConsolidation.ComputeCommands",
       proved_by=("underutilized-delete-only",)),
    _i("nodepool.consolidationPolicy.Balanced", "nodepool",
       "consolidationPolicy Balanced: a move only when its savings outweigh its disruption "
       "cost (the pool's score threshold)",
       f"{DISRUPTION}/balanced.go:EvaluateBalancedMove",
       f"{DISRUPTION}/balanced.go:balancedEvaluator.CanPassThreshold",
       proved_by=("balanced-unscored", "balanced-k-one")),
    _i("nodepool.consolidateAfter", "nodepool",
       "consolidateAfter: how long after its last pod event a node becomes Consolidatable",
       "pkg/controllers/nodeclaim/disruption/consolidation.go:Consolidation.Reconcile",
       "pkg/utils/disruption/disruption.go:IsUnderConsolidateAfter",
       proved_by=("consolidate-after-halved", "never-consolidatable")),
    _i("nodepool.budgets.nodes", "nodepool",
       "disruption budgets' nodes (a count or a percentage): how many nodes may be disrupted "
       "at once",
       "pkg/apis/v1/nodepool.go:NodePool.GetAllowedDisruptionsByReason",
       "pkg/apis/v1/nodepool.go:Budget.GetAllowedDisruptions",
       proved_by=("budgets-ignored",)),
    _i("nodepool.budgets.reasons", "nodepool",
       "disruption budgets' reasons: a budget limits only the reasons it lists",
       "pkg/apis/v1/nodepool.go:NodePool.GetAllowedDisruptionsByReason",
       proved_by=("budget-reasons-ignored",)),
    _i("nodepool.budgets.schedule", "nodepool",
       "disruption budgets' schedule and duration: a budget applies only inside its window",
       "pkg/apis/v1/nodepool.go:Budget.IsActive",
       proved_by=("budget-window-never-closes",)),
    _i("nodepool.outsideHash", "nodepool",
       "the fields outside the template hash: a change to weight, limits or spec.disruption "
       "(consolidateAfter, consolidationPolicy, budgets) drifts no NodeClaim",
       "pkg/apis/v1/nodepool.go:NodePool.Hash",
       "pkg/controllers/nodeclaim/disruption/drift.go:areStaticFieldsDrifted",
       proved_by=("nodepool-hash-whole-spec",)),
    _i("nodepool.template.expireAfter", "nodepool",
       "template expireAfter: a NodeClaim is deleted that long after its creation",
       "pkg/controllers/nodeclaim/expiration/controller.go:Controller.Reconcile",
       proved_by=("expire-after-ignored", "expire-after-doubled")),
    _i("nodepool.template.terminationGracePeriod", "nodepool",
       "template terminationGracePeriod: an eventual disruption (drift, expiry) goes ahead "
       "past blocking pods, and the drain ends after it",
       f"{DISRUPTION}/types.go:NewCandidate",
       "pkg/controllers/node/termination/controller.go:Controller.nodeTerminationTime",
       proved_by=("termination-grace-ignored",)),
    # --- the Node and NodeClaim ----------------------------------------------------------
    _i("node.doNotDisrupt", "node",
       "the karpenter.sh/do-not-disrupt: \"true\" annotation on the Node (or NodeClaim): the "
       "node is no voluntary disruption candidate",
       "pkg/controllers/state/statenode.go:StateNode.ValidateNodeDisruptable",
       proved_by=("node-do-not-disrupt-ignored",)),
    _i("node.taints", "node",
       "taints put on a launched node by someone else (an add-on tainting it NoExecute): "
       "pending pods are not placed there, so Karpenter launches again, and takes back the "
       "nodes left empty",
       f"{SCHED}/existingnode.go:ExistingNode.CanAdd",
       "pkg/controllers/state/statenode.go:StateNode.Taints"),
    _i("node.conditions", "node",
       "node conditions matching the cloud provider's repair policies: the node is repaired "
       "once the policy's toleration has passed",
       "pkg/controllers/node/health/policy.go:RepairPolicyMatcher.newMatch",
       f"{DISRUPTION}/repair.go:Repair.ShouldDisrupt",
       proved_by=("repair-toleration-ignored",)),
    _i("nodeclaim.nodepoolHash", "node",
       "the NodeClaim's karpenter.sh/nodepool-hash and hash version against its NodePool's: "
       "a mismatch at equal versions is drift (after an upgrade too)",
       "pkg/controllers/nodeclaim/disruption/drift.go:areStaticFieldsDrifted",
       "pkg/apis/v1/nodepool.go:NodePool.Hash",
       proved_by=("nodepool-hash-changed",)),
    # --- volumes -------------------------------------------------------------------------
    _i("volume.storageClass.topology", "volume",
       "a PVC's StorageClass with WaitForFirstConsumer and several allowedTopologies terms: "
       "the NodeClaim is constrained to the zones the terms allow",
       f"{SCHED}/volumetopology.go:VolumeTopology.getStorageClassRequirements",
       f"{SCHED}/volumetopology.go:VolumeTopology.GetRequirements",
       proved_by=("storage-class-first-term-only",),
       gap="no provisioner binds the claim in local mode (no CSI driver), so the pod is never "
           "seen running: Karpenter's plan and its node's zone are asserted; a driver "
           "provisioning in the node's zone needs eks"),
    _i("volume.pv.nodeAffinity", "volume",
       "a bound PV's node affinity over several zones: the pod's NodeClaim must be in one",
       f"{SCHED}/volumetopology.go:VolumeTopology.getPersistentVolumeRequirements",
       "pkg/controllers/provisioning/provisioner.go:Provisioner.getVolumeTopologyRequirements",
       proved_by=("pv-zone-affinity-dropped",),
       gap="a static hostPath PV with zone affinity only; a CSI driver's dynamically provisioned "
           "PV (its topology written by the driver) needs eks"),
    _i("volume.pvc.unbound", "volume",
       "a PVC that does not exist or whose StorageClass or PV is missing: the pod is not "
       "provisioned for",
       f"{SCHED}/volumetopology.go:VolumeTopology.ValidatePersistentVolumeClaims",
       proved_by=("immediate-claims-provisioned",),
       gap="a claim that does not exist and an unbound claim of an Immediate class; a claim "
           "being deleted, one Lost, one naming a missing PV or lacking the bind-completed "
           "annotation are not set up"),
    _i("volume.attachLimits", "volume",
       "a CSI driver's volume attach limit per node: pods whose volumes would exceed it need "
       "another node",
       "pkg/scheduling/volumeusage.go:VolumeUsage.ExceedsLimits",
       f"{SCHED}/nodeclaim.go:filterInstanceTypesByVolumeAttachmentLimits",
       "pkg/controllers/state/cluster.go:Cluster.populateVolumeLimits",
       kwok="the limits come from each node's CSINode, which a CSI driver's node plugin "
            "publishes through the kubelet; a KWOK node has neither (writing CSINode objects "
            "by hand would test the harness, not a driver)",
       eks="the EBS CSI driver's real attach limits per instance type, and pods with more "
           "PVCs than one node can attach spreading to more nodes"),
    # --- NodeOverlays --------------------------------------------------------------------
    _i("overlay.capacity", "overlay",
       "a NodeOverlay's capacity: extended resources added to the types it selects",
       "pkg/controllers/nodeoverlay/store.go:internalInstanceTypeStore.apply",
       proved_by=("overlay-capacity-ignored",)),
    _i("overlay.price", "overlay",
       "a NodeOverlay's price or priceAdjustment: the offerings' prices Karpenter compares",
       "pkg/controllers/nodeoverlay/store.go:internalInstanceTypeStore.applyPriceOverlays",
       proved_by=("overlay-price-ignored",)),
    # --- options and gates ---------------------------------------------------------------
    _i("options.MIN_VALUES_POLICY.Strict", "options",
       "MIN_VALUES_POLICY Strict (the default): no NodeClaim with fewer types than minValues",
       f"{SCHED}/nodeclaim.go:filterInstanceTypesByRequirements",
       f"{OPTIONS}:Options.AddFlags"),
    _i("options.MIN_VALUES_POLICY.BestEffort", "options",
       "MIN_VALUES_POLICY BestEffort: minValues relaxed when it cannot be met",
       f"{SCHED}/nodeclaim.go:filterInstanceTypesByRequirements",
       f"{DISRUPTION}/helpers.go:SimulateScheduling",
       proved_by=("best-effort-read-as-strict", "min-values-relaxed-unannotated")),
    _i("options.BATCH_DURATIONS", "options",
       "BATCH_MAX_DURATION and BATCH_IDLE_DURATION: how long pending pods are gathered into "
       "one scheduling decision (and the nomination window, 2 x max)",
       "pkg/controllers/provisioning/batcher.go:Batcher.Wait",
       "pkg/controllers/state/statenode.go:nominationWindow",
       gap="BATCH_MAX_DURATION is only bounded (the NodeClaim no later than max + solve after "
           "the first pod), not driven to cut a batch; the nomination window is not shown",
       proved_by=("batch-idle-ignored",)),
    _i("options.PREFERENCE_POLICY", "options",
       "PREFERENCE_POLICY Ignore: preferred affinities and ScheduleAnyway spreads are "
       "dropped instead of tried",
       f"{SCHED}/topology.go:Topology.newForTopologies",
       f"{DISRUPTION}/helpers.go:SimulateScheduling",
       proved_by=("preference-policy-ignored",)),
    _i("options.SCHEDULER_CONFIG", "options",
       "SCHEDULER_CONFIG: the kube-scheduler's default topology spread constraints, injected "
       "into pods that have none",
       f"{SCHED}/defaultconstraints.go:DefaultTopologySpreadInjector.Inject",
       f"{SCHED}/defaultconstraints.go:DefaultTopologySpreadInjector.defaultSelector",
       proved_by=("default-spread-replicaset-missed",),
       gap="one DoNotSchedule zone default on a Deployment's pods (the selector from their "
           "ReplicaSet) and a pod with its own spread; selectors from Services, "
           "ReplicationControllers or StatefulSets, ScheduleAnyway defaults and consolidation's "
           "simulation are not set up"),
    _i("options.IGNORE_DRA_REQUESTS", "options",
       "IGNORE_DRA_REQUESTS (default true) and pods' resource claims: such pods are not "
       "provisioned for; false turns on DRA scheduling against ResourceSlices",
       f"{SCHED}/scheduler.go:Scheduler.add",
       "pkg/controllers/controllers.go:NewControllers",
       kwok="DRA scheduling needs ResourceSlices a DRA driver publishes for each device; the "
            "KWOK provider and its nodes have no driver (only the ignored path can be shown)",
       eks="a DRA driver's ResourceSlices (e.g. NVIDIA's) deciding which instance types a "
           "resource claim fits"),
    _i("gates.SpotToSpotConsolidation", "options",
       "feature gate SpotToSpotConsolidation: a spot node may be replaced by a cheaper spot "
       "node (with enough cheaper types)",
       f"{DISRUPTION}/consolidation.go:consolidation.computeSpotToSpotConsolidation",
       proved_by=("spot-to-spot-min-types-raised", "spot-to-spot-gate-ignored")),
    _i("gates.CapacityBuffer", "options",
       "feature gate CapacityBuffer: CapacityBuffers' virtual pods provisioned for as if "
       "pending",
       "pkg/controllers/provisioning/provisioner.go:Provisioner.GetPendingPods",
       "pkg/controllers/provisioning/provisioner.go:Provisioner.Reconcile",
       proved_by=("capacity-buffer-pods-dropped", "buffer-chunk-labels-dropped")),
    _i("gates.NodeRepair", "options",
       "feature gate NodeRepair: unhealthy nodes repaired as a disruption method",
       f"{DISRUPTION}/repair.go:Repair.ShouldDisrupt",
       f"{DISRUPTION}/controller.go:NewMethods"),
    _i("gates.NodeOverlay", "options",
       "feature gate NodeOverlay: NodeOverlays applied to the instance types",
       "pkg/controllers/controllers.go:NewControllers"),
    _i("gates.StaticCapacity", "options",
       "feature gate StaticCapacity: static pools (spec.replicas) run",
       "pkg/controllers/controllers.go:NewControllers"),
    _i("gates.ReservedCapacity", "options",
       "feature gate ReservedCapacity: reserved offerings (capacity reservations) preferred "
       "and reserved per NodeClaim",
       f"{SCHED}/nodeclaim.go:NodeClaim.offeringsToReserve",
       kwok="the KWOK provider never sets cloudprovider.ReservationIDLabel (the AWS provider "
            "does), so a reserved offering's ReservationID() reads an undefined key, whose "
            "Exists requirement's Any() is a random number on every call, and the "
            "ReservationManager's CanReserve panics on the id it has never seen (read in "
            "v1.15.0's kwok/main.go, pkg/cloudprovider/types.go, reservationmanager.go; not "
            "run); aws-sim's fake EC2 (moto) has no capacity reservations",
       eks="an on-demand capacity reservation selected by the EC2NodeClass: NodeClaims "
           "launched into it up to its count, capacity-type reserved, the rest on-demand"),
    _i("gates.TerminateFirstDrift", "options",
       "feature gate TerminateFirstDrift: a drifted node may be terminated before its "
       "replacement is ready",
       f"{DISRUPTION}/drift.go:Drift.ComputeCommands",
       f"{DISRUPTION}/staticdrift.go:StaticDrift.ComputeCommands",
       proved_by=("terminate-first-gate-ignored",)),
    _i("gates.TerminateFirstRepair", "options",
       "feature gate TerminateFirstRepair: an unhealthy node may be terminated before its "
       "replacement is ready",
       f"{DISRUPTION}/repair.go:Repair.computeCommands",
       proved_by=("terminate-first-repair-gate-ignored",)),
    _i("gates.PodDeletionCostManagement", "options",
       "feature gate PodDeletionCostManagement: Karpenter ranks pods' deletion cost by the "
       "node it would disrupt first",
       "pkg/controllers/controllers.go:NewControllers",
       "pkg/controllers/pod/deletioncost/ranking.go:RankNodes",
       "pkg/utils/disruption/disruption.go:EvictionCost",
       proved_by=("deletion-cost-reversed",)),
    # --- the AWS provider ----------------------------------------------------------------
    _i("provider.ec2nodeclass.amiSelectorTerms", "provider",
       "an EC2NodeClass's amiSelectorTerms: the AMI launched; one that cannot be resolved "
       "keeps the NodeClass not ready, and a change drifts the nodes",
       "pkg/cloudprovider/drift.go:CloudProvider.isAMIDrifted",
       module=AWS_PROVIDER, proved_by=("ami-drift-never",)),
    _i("provider.interruption", "provider",
       "interruption messages on the SQS queue (spot interruption warnings): the node is "
       "cordoned, drained and replaced",
       "pkg/controllers/interruption/utils.go:actionForMessage",
       module=AWS_PROVIDER, proved_by=("spot-interruption-ignored",)),
)

BY_ID: dict[str, Input] = {i.id: i for i in INPUTS}
