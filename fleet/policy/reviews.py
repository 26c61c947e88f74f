"""What a pull request changes for each cluster, as a reviewer asks it: which claims, on which devices, what quota.

A reviewer of a team's pull request wants three answers the findings alone do not give:
which claim templates the change adds or edits (after the cluster's overlays, compared with the
base revision), where each of them can run — the cluster's GPUNodePools one by one, the devices
and how many copies fit, and with a live cluster or a snapshot the same count on what the cluster
publishes — and how each team's device quota compares with what its templates request, before and
after. ``fleetctl validate -o markdown`` and ``fleetctl diff -o markdown`` print these answers in a
pull request's comment.

The pool-by-pool counts use the declared pools' devices (``declarations``), one inventory per
pool: a claim's devices all come from one node, so its copies on the cluster are the sum over
pools. The counts on a snapshot or a live cluster come from the validation's own satisfaction
rows, so the comment and ``fleetctl validate`` never disagree. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fleet.inventory import Checker, Inventory
from fleet.manifests import ClusterView, Location, Manifest, Revision, cluster_names, resolve
from fleet.policy import declarations, tenancy
from fleet.policy.satisfiability import Satisfaction

ADDED = "added"
CHANGED = "changed"


@dataclass(frozen=True)
class PoolFit:
    """How one claim fares on one GPUNodePool's declared devices."""

    pool: str
    nodes: int
    devices: int
    copies: int


@dataclass(frozen=True)
class ClaimFit:
    """A claim (template) the change adds or edits, and where it can run."""

    object: str
    location: Location
    change: str
    """``added`` or ``changed`` (compared with the base, after the cluster's overlays)."""
    pools: tuple[PoolFit, ...]
    """Every declared pool of the cluster, those the claim cannot use with zeros."""
    declared: bool
    """Whether the cluster's pools could be judged (none, or a model not in the table: False)."""
    measured: Satisfaction | None = None
    """The same claim on a snapshot or a live cluster (``--inventory``/``--context``, or diff's cluster)."""

    @property
    def copies(self) -> int:
        return sum(p.copies for p in self.pools)


@dataclass(frozen=True)
class QuotaChange:
    """A team's devices of one class, before (base) and after the change; None where there was none."""

    team: str
    device_class: str
    before: tenancy.QuotaUse | None
    after: tenancy.QuotaUse | None

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True)
class ClusterReview:
    cluster: str
    claims: list[ClaimFit]
    quotas: list[QuotaChange]


def review(
    head: Revision, *, base: Revision | None, cluster: str, satisfaction: Sequence[Satisfaction] = ()
) -> ClusterReview:
    """What ``head`` changes on ``cluster`` against ``base`` (None: no base, every claim is ``added``).

    ``satisfaction`` holds the validation's rows; those from a snapshot or a live cluster are kept
    beside each claim's declared counts.
    """
    view = resolve(head, cluster=cluster)
    before = resolve(base, cluster=cluster) if base is not None and cluster in cluster_names(base) else None
    measured = {s.object: s for s in satisfaction if s.cluster == cluster and s.source != declarations.SOURCE}
    return ClusterReview(
        cluster=cluster,
        claims=claim_fits(view, before=before, measured=measured),
        quotas=quota_changes(view, before=before),
    )


def changed_claims(view: ClusterView, *, before: ClusterView | None) -> list[tuple[Manifest, str]]:
    """The claims and templates of ``view`` that ``before`` lacks or holds with other content."""
    old = {m.ref: m.data for m in before.claims} if before is not None else {}
    found: list[tuple[Manifest, str]] = []
    for claim in view.claims:
        if claim.ref not in old:
            found.append((claim, ADDED))
        elif old[claim.ref] != claim.data:
            found.append((claim, CHANGED))
    return found


def claim_fits(
    view: ClusterView, *, before: ClusterView | None, measured: dict[str, Satisfaction] | None = None
) -> list[ClaimFit]:
    changed = changed_claims(view, before=before)
    if not changed:
        return []
    pooled = declarations.declared(view)
    classes = {m.name: m.data for m in view.device_classes}
    checkers = (
        {name: Checker(inventory=Inventory.from_slices(s), classes=classes) for name, s in sorted(pooled.pools.items())}
        if pooled.inventory is not None
        else {}
    )
    fits: list[ClaimFit] = []
    for claim, change in changed:
        pools = []
        for name, checker in checkers.items():
            if claim.kind == "ResourceClaimTemplate":
                report = checker.check_template(claim.data)
            else:
                report = checker.check_claim(claim.data.get("spec") or {})
            pools.append(PoolFit(name, report.nodes, report.devices, report.capacity))
        fits.append(
            ClaimFit(
                claim.ref,
                claim.location,
                change,
                tuple(pools),
                pooled.inventory is not None,
                (measured or {}).get(claim.ref),
            )
        )
    return fits


def quota_changes(view: ClusterView, *, before: ClusterView | None) -> list[QuotaChange]:
    """Every team's quota and requested devices per class on the cluster, before and after."""
    after = {(u.team, u.device_class): u for u in tenancy.quota_use(view.manifests)}
    old = {(u.team, u.device_class): u for u in tenancy.quota_use(before.manifests)} if before is not None else {}
    return [
        QuotaChange(team, name, old.get((team, name)), after.get((team, name))) for team, name in sorted({*after, *old})
    ]


__all__ = ["ADDED", "CHANGED", "ClaimFit", "ClusterReview", "PoolFit", "QuotaChange", "changed_claims", "review"]
