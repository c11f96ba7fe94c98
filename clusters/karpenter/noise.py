"""Lines of Karpenter's log that are known noise: errors a healthy Karpenter logs in normal
operation, by release, each with why it is harmless. The log oracle (fixtures/oracles/)
leaves them out of its count of repeated errors, never out of its panic or refused-create
checks, and a pattern names one error, not a kind of error. The table is rendered into
docs/oracles.md."""

from __future__ import annotations

import re
from dataclasses import dataclass

from karpenter_e2e.clusters.infra import versions


@dataclass(frozen=True)
class Noise:
    pattern: str  # matched against "<controller>: <message>: <error>"
    since: str  # the first release that logs it ("" = every served release)
    until: str  # the last release that logs it ("" = still)
    why: str
    name: str = ""  # its id among the oracles' excuses (fixtures/oracles/excuses.py)
    # Noise a race explains is noise only for as long as the race can last
    # (clock.NOISE_RACE_S from the first line of an episode); lines later than that are a
    # loop and count. False: noise by nature, as long as it lasts.
    race: bool = True
    # Noise only while the NodePool the line names is not Ready, as the run's watch saw it
    # (with the cache lag STATE_LAG_S): a line about a Ready pool counts. Where no watch
    # recorded the pools (a diagnosis of the log alone) it is read as a race's noise.
    while_pool_unready: bool = False

    def applies(self, release: str) -> bool:
        if not versions.is_release(release):
            return True
        key = versions.semver(release)
        return (not self.since or key >= versions.semver(self.since)) and \
            (not self.until or key <= versions.semver(self.until))


NOISE: tuple[Noise, ...] = (
    Noise(r"^[\w.]*: could not schedule pod: ", "", "",
          "logged at ERROR for every pod a scheduling round cannot place, in every round (the "
          "pod re-triggers the provisioner every 10 s: provisioning/scheduling/scheduler.go "
          "Results.Record); the same round gives the pod a FailedScheduling event, which the "
          "no-pod-ignored oracle reads. A pod left unplaced is Karpenter's answer, not an "
          "error of Karpenter's", name="could-not-schedule", race=False),
    Noise(r"^disruption: Reconciler error: disrupting, computing disruption decision, creating "
          r"scheduler, no nodepools found", "", "",
          "while no NodePool is ready (its NodeClass being replaced, as drift does), the "
          "disruption controller's simulation returns the provisioner's ErrNodePoolsNotFound "
          "as an error (disruption/helpers.go: \"creating scheduler, %w\"), and "
          "controller-runtime retries it at once: 3 lines in 33 ms, then the pool is ready "
          "(soak 21). The provisioner logs the same state at INFO (\"no dynamic nodepools "
          "found\"); with no ready pool there is nothing to disrupt. A race: lines that go on "
          "past it are a disruption controller that finds no pool in a loop",
          name="no-nodepools-found"),
    Noise(r"^provisioner: ignoring nodepool, not ready", "", "",
          "every provisioning round logs this at ERROR (with a nil error) for each NodePool "
          "whose Ready condition is not True, and leaves the pool out of the round "
          "(provisioning/provisioner.go GetNodePools; in every source read here, v1.5.5 to "
          "v1.15.0). A pool is not Ready until its NodeClass is, a moment after it is created: "
          "a scenario's pods pending meanwhile trigger a round a second, so a loaded machine "
          "logs it several times. Noise only while the watch saw the pool not Ready: lines "
          "about a Ready pool are a provisioner that ignores it",
          name="nodepool-not-ready", while_pool_unready=True),
    # Found by the EKS rehearsal (docs/findings.md: "The AWS provider's metrics controller
    # fails for the whole cluster while one EC2NodeClass resolves its subnets"): v1.15.0's
    # form names the pools, so it is tied to their not-Ready spell; v1.14.3's bare form names
    # nothing and still counts.
    Noise(r"^cloudprovider\.metrics: Reconciler error: getting instance types, getting cloud "
          r"provider instance types, no subnets found", "v1.15.0", "",
          "the AWS provider's offering-metrics controller (pkg/controllers/metrics/"
          "controller.go, a singleton run every minute) asks every NodePool's instance types; "
          "for a pool whose EC2NodeClass has not resolved its subnets yet the provider returns "
          "'no subnets found' (instancetype.go List), which v1.15.0 wraps with the pool's name "
          "and returns, and controller-runtime retries at its 5 ms doubling backoff: 8 lines "
          "in 0.64 s in the rehearsal's night, ending as the NodeClass discovered its subnets. "
          "A pool is not Ready until its NodeClass is. Noise only while the watch saw the "
          "named pools not Ready: lines about a Ready pool are a controller that cannot read "
          "a resolved NodeClass",
          name="metrics-subnets-unresolved", while_pool_unready=True),
    # Found by the upgrade gate (docs/findings.md: "Karpenter logs errors for NodePools its
    # NodeOverlay controller has not evaluated yet"): reported there as a finding, listed here
    # because no decision depends on it.
    Noise(r"^state\.pricing: Reconciler error: refreshing pricing info, applying nodeoverlays, "
          r"nodepool \"[^\"]+\" is awaiting evaluation", "v1.13.0", "",
          "right after Karpenter starts with NodePools already there, the pricing controller "
          "asks each pool's instance types before the NodeOverlay controller has evaluated it "
          "and returns the store's UnevaluatedNodePoolError as an error (state/informer/"
          "pricing.go), which controller-runtime retries within milliseconds: 6 lines in "
          "0.2 s after the upgrade gate's restart, then the pools are evaluated. The "
          "provisioner and the disruption controller treat the same error as 'not ready yet' "
          "(provisioning/provisioner.go, disruption/helpers.go IsUnevaluatedNodePoolError). A "
          "race: lines that go on past it are a pool the overlay store never evaluates",
          name="pricing-awaiting-evaluation"),
    Noise(r"^state\.nodeclaim: Reconciler error: failed to get instance types for nodepool "
          r"\"[^\"]+\" while adding offering for instance \"[^\"]+\", applying nodeoverlays, "
          r"nodepool \"[^\"]+\" is awaiting evaluation", "v1.13.0", "",
          "the same race in the cluster state's cost bookkeeping (state/cost/cost.go: "
          "\"failed to get instance types for nodepool ... while adding offering\"): each "
          "existing NodeClaim's reconcile fails until its pool is evaluated, then succeeds. A "
          "race, as the pricing one", name="nodeclaim-awaiting-evaluation"),
)


def for_release(release: str) -> list[tuple[Noise, re.Pattern[str]]]:
    return [(n, re.compile(n.pattern)) for n in NOISE if n.applies(release)]


def matching(noise: list[tuple[Noise, re.Pattern[str]]], line) -> Noise | None:
    """The known noise a log line is (it has controller, message and error), or None."""
    text = f"{line.controller}: {line.message}: {line.error}"
    return next((n for n, p in noise if p.search(text)), None)
