"""Rules about what a team may claim, checked on what a cluster actually gets.

Quotas and allowed classes can differ per cluster (overlays), so these run
on each cluster's resolved view: a claim's namespace must be one of its
team's namespaces (and not another team's), every request names a
DeviceClass the repository declares and the team may use, and the devices
requested — one request's ``count``, and the sum over all the team's
templates and claims — stay within the team's quota per class. ``All``
requests every matching device, which no quota can bound, so it is refused
for a class with a quota. For ``firstAvailable`` the largest alternative per
class counts (any of them may be chosen).

``adminAccess: true`` (a request that sees devices already allocated to
others, for monitoring) is refused by the API server unless the namespace
carries ``resource.kubernetes.io/admin-access: "true"``. Fleet sets that label
on the namespaces of a Team with ``adminAccess: true`` (fleet.engine.plans), so
a request with it is an error exactly when its Team does not allow it.

A team never gets a reserved namespace (``reserved-namespace``): ``kube-*`` and
``default`` belong to Kubernetes, ``fleet-system`` to fleet itself (its ledger),
and the GPU Operator's namespace to the operator. fleet would grant the team's
owners claims there, put a quota on it, and on removal try to prune it.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from fleet.manifests import Finding, Manifest, kinds
from fleet.policy import walks

FLEET_NAMESPACE = "fleet-system"
"""fleet's own namespace (its ledger, Lease and ServiceAccount; ``fleet.engine.ledgers.NAMESPACE``)."""
DEFAULT_OPERATOR_NAMESPACE = str(kinds.GPUOperatorSpec.model_fields["namespace"].default)


def reserved(namespace: str, *, operator_namespace: str | None = None) -> str:
    """Why ``namespace`` may not be a team's ("" when it may); the operator's namespace defaults to gpu-operator."""
    if namespace.startswith("kube-") or namespace == "default":
        return "which belongs to Kubernetes"
    if namespace == FLEET_NAMESPACE:
        return "which is fleet's own"
    if namespace == (operator_namespace or DEFAULT_OPERATOR_NAMESPACE):
        return "which is the GPU Operator's"
    return ""


@dataclass(frozen=True)
class QuotaUse:
    """A team's devices of one class on one cluster: its quota and what its templates and claims request."""

    team: str
    device_class: str
    quota: int | None
    """The Team's ``quota`` for the class; None when it sets none."""
    requested: int
    """Devices one copy of each template and claim requests together (``firstAvailable``: the largest)."""
    unbounded: bool = False
    """A request takes ``allocationMode: All`` of this class: no count bounds it."""


def quota_use(manifests: Sequence[Manifest]) -> list[QuotaUse]:
    """Per team and device class (quota'd or requested), in name order: the sums ``team-quota`` checks."""
    teams = _teams(manifests)
    requested: dict[tuple[str, str], int] = defaultdict(int)
    unbounded: set[tuple[str, str]] = set()
    for manifest in manifests:
        if manifest.kind not in ("ResourceClaimTemplate", "ResourceClaim") or manifest.team not in teams:
            continue
        owner = teams[manifest.team].name
        counts, every = _requested(manifest)
        for name, count in counts.items():
            requested[(owner, name)] += count
        unbounded.update((owner, name) for name in every)
    rows: list[QuotaUse] = []
    for team in sorted(teams.values(), key=lambda m: m.name):
        quota = _spec(team).quota
        names = set(quota) | {c for t, c in (*requested, *unbounded) if t == team.name}
        rows.extend(
            QuotaUse(
                team.name, name, quota.get(name), requested.get((team.name, name), 0), (team.name, name) in unbounded
            )
            for name in sorted(names)
        )
    return rows


def _requested(claim: Manifest) -> tuple[dict[str, int], set[str]]:
    """Devices per class that one copy of ``claim`` requests (a request group counts its largest
    alternative), and the classes it requests with ``allocationMode: All``."""
    per_request: dict[tuple[int, str], int] = {}
    every: set[str] = set()
    for request in walks.requests(claim):
        name = request.body.device_class_name
        count = request.body.devices
        if count is None:
            every.add(name)
            continue
        key = (request.group, name)
        per_request[key] = max(per_request.get(key, 0), count)
    totals: dict[str, int] = defaultdict(int)
    for (_, name), count in per_request.items():
        totals[name] += count
    return dict(totals), every


def check(manifests: Sequence[Manifest], *, owners: Mapping[str, str]) -> Iterator[Finding]:
    """Tenancy findings for one cluster's manifests.

    ``owners`` maps every namespace to its team over the whole revision (see
    :func:`namespace_owners`), so a finding names the owner even when that
    team does not run on this cluster.
    """
    teams = _teams(manifests)
    classes = {m.name for m in manifests if m.kind == "DeviceClass"}
    yield from _shared_namespaces(teams)
    operators = [m.model for m in manifests if isinstance(m.model, kinds.GPUOperator)]
    operator_namespace = operators[0].spec.namespace if operators else None
    for team in teams.values():
        yield from _reserved(team, operator_namespace=operator_namespace)
    for team in teams.values():
        yield from _team_classes(team, classes=classes)
    by_team: dict[str, list[Manifest]] = defaultdict(list)
    declared = "\0".join(sorted(classes))
    contexts = {folder: f"{_context(team)}\0{declared}" for folder, team in teams.items()}
    for manifest in manifests:
        if (
            manifest.kind in ("ResourceClaimTemplate", "ResourceClaim")
            and manifest.team is not None
            and manifest.team in teams
        ):
            by_team[manifest.team].append(manifest)
            yield from _claim(
                manifest, team=teams[manifest.team], classes=classes, owners=owners, context=contexts[manifest.team]
            )
    for name, claims in sorted(by_team.items()):
        yield from _quota(teams[name], claims=claims)


def _context(team: Manifest) -> str:
    """Everything of a Team that a claim's own tenancy findings depend on, as a memo key."""
    spec = _spec(team)
    return f"{team.name}\0{team.file}\0{spec.namespaces}\0{spec.device_classes}\0{spec.admin_access}"


def _claim(
    claim: Manifest, *, team: Manifest, classes: set[str], owners: Mapping[str, str], context: str
) -> tuple[Finding, ...]:
    """A claim's namespace and request findings, computed once per claim and context (team, declared
    classes, the owner of its namespace): a commit re-checks only the claims it changed."""
    key = f"{context}\0{owners.get(claim.namespace or '')}"
    memo: tuple[str, tuple[Finding, ...]] | None = claim.memo.get("tenancy")
    if memo is None or memo[0] != key:  # one slot: a changed Team replaces it
        memo = claim.memo["tenancy"] = (
            sys.intern(key),  # one string per team and namespace owner, not one per claim
            (*_namespace(claim, team=team, owners=owners), *_requests(claim, team=team, classes=classes)),
        )
    return memo[1]


def _spec(team: Manifest) -> kinds.TeamSpec:
    assert isinstance(team.model, kinds.Team)
    return team.model.spec


def _teams(manifests: Sequence[Manifest]) -> dict[str | None, Manifest]:
    return {m.team: m for m in manifests if isinstance(m.model, kinds.Team) and m.team is not None}


def namespace_owners(manifests: Sequence[Manifest]) -> dict[str, str]:
    """Namespace → name of the team that declares it (first in name order)."""
    owners: dict[str, str] = {}
    for team in sorted(_teams(manifests).values(), key=lambda m: m.name):
        for namespace in _spec(team).namespaces:
            owners.setdefault(namespace, team.name)
    return owners


def _shared_namespaces(teams: dict[str | None, Manifest]) -> Iterator[Finding]:
    seen: dict[str, Manifest] = {}
    for team in sorted(teams.values(), key=lambda m: m.name):
        for index, namespace in enumerate(_spec(team).namespaces):
            other = seen.setdefault(namespace, team)
            if other is not team:
                yield Finding(
                    team.positions.at(("spec", "namespaces", index)),
                    "team-namespace",
                    f"namespace {namespace!r} already belongs to team {other.name!r}",
                    hint="each namespace belongs to one team",
                    object=team.ref,
                )


def _reserved(team: Manifest, *, operator_namespace: str | None) -> Iterator[Finding]:
    for index, namespace in enumerate(_spec(team).namespaces):
        why = reserved(namespace, operator_namespace=operator_namespace)
        if why:
            yield Finding(
                team.positions.at(("spec", "namespaces", index)),
                "reserved-namespace",
                f"team {team.name!r} names namespace {namespace!r}, {why}",
                hint="give the team a namespace of its own",
                object=team.ref,
            )


def _team_classes(team: Manifest, *, classes: set[str]) -> Iterator[Finding]:
    for index, name in enumerate(_spec(team).device_classes):
        if name not in classes:
            yield Finding(
                team.positions.at(("spec", "deviceClasses", index)),
                "unknown-device-class",
                f"Team allows DeviceClass {name!r}, which the repository does not declare",
                hint=f"declared classes: {', '.join(sorted(classes)) or 'none'}",
                object=team.ref,
            )


def _namespace(claim: Manifest, *, team: Manifest, owners: Mapping[str, str]) -> Iterator[Finding]:
    allowed = _spec(team).namespaces
    if claim.namespace is None:
        yield Finding(
            claim.positions.at(("metadata",)),
            "team-namespace",
            f"{claim.kind} has no namespace",
            hint=f"set metadata.namespace to one of: {', '.join(allowed)}",
            object=claim.ref,
        )
    elif claim.namespace not in allowed:
        other = owners.get(claim.namespace)
        if other == team.name:  # the base lists it; an overlay dropped it for this cluster
            owner = " (the team lists it elsewhere, but not after this cluster's overlays)"
        else:
            owner = f" (it belongs to team {other!r})" if other else ""
        yield Finding(
            claim.positions.at(("metadata", "namespace")),
            "team-namespace",
            f"team {team.name!r} cannot write into namespace {claim.namespace!r}{owner}",
            hint=f"use one of the team's namespaces: {', '.join(allowed)}",
            object=claim.ref,
        )


def _requests(claim: Manifest, *, team: Manifest, classes: set[str]) -> Iterator[Finding]:
    """Per request (one walk: 10,000 templates make it count): its class, then adminAccess."""
    allowed = _spec(team).device_classes
    admin = _spec(team).admin_access
    for request in walks.requests(claim):
        if not admin and getattr(request.body, "admin_access", None):  # firstAvailable entries have none
            yield _admin_access(claim, team=team, request=request)
        name = request.body.device_class_name
        if name in classes and name in allowed:
            continue
        where = claim.positions.at((*request.path, "deviceClassName"))  # only for a finding: made on demand
        if name not in classes:
            yield Finding(
                where,
                "unknown-device-class",
                f"request {request.name!r}: no DeviceClass {name!r}",
                hint=f"declared classes: {', '.join(sorted(classes)) or 'none'}",
                object=claim.ref,
            )
        elif name not in allowed:
            yield Finding(
                where,
                "team-device-class",
                f"request {request.name!r}: team {team.name!r} may not use DeviceClass {name!r}",
                hint=f"allowed: {', '.join(allowed)}; ask the platform team to add it to {team.file}",
                object=claim.ref,
            )


def _admin_access(claim: Manifest, *, team: Manifest, request: walks.Request) -> Finding:
    return Finding(
        claim.positions.at((*request.path, "adminAccess")),
        "team-admin-access",
        f"request {request.name!r} sets adminAccess, which team {team.name!r} does not allow: the API "
        f"server refuses it in a namespace without the label {kinds.ADMIN_ACCESS_LABEL}=true",
        hint=f"remove adminAccess, or let the platform team set adminAccess: true in {team.file} "
        "(fleet then labels the team's namespaces)",
        object=claim.ref,
    )


def _quota(team: Manifest, *, claims: list[Manifest]) -> Iterator[Finding]:
    quota = _spec(team).quota
    totals: dict[str, int] = defaultdict(int)
    users: dict[str, list[str]] = defaultdict(list)
    for claim in claims:
        for request in walks.requests(claim):
            name = request.body.device_class_name
            if name not in quota:
                continue
            count = request.body.devices
            if count is None:
                yield Finding(
                    claim.positions.at((*request.path, "allocationMode")),
                    "team-quota",
                    f"request {request.name!r}: allocationMode All takes every matching device, "
                    f"which the quota of {quota[name]} {name} cannot bound",
                    hint="request an exact count instead",
                    object=claim.ref,
                )
                continue
            if count > quota[name]:
                yield Finding(
                    claim.positions.at((*request.path, "count")),
                    "team-quota",
                    f"request {request.name!r} asks for {count} {name} devices, over team "
                    f"{team.name!r}'s quota of {quota[name]}",
                    hint=f"lower count, or raise quota[{name!r}] in {team.file}",
                    object=claim.ref,
                )
        for name, count in _requested(claim)[0].items():
            if name in quota:
                totals[name] += count
                users[name].append(f"{claim.name}={count}")
    for name, total in sorted(totals.items()):
        if total > quota[name]:
            yield Finding(
                team.positions.at(("spec", "quota", name)),
                "team-quota",
                f"team {team.name!r} templates and claims request {total} {name} devices together, "
                f"over the quota of {quota[name]} ({', '.join(users[name])})",
                hint="raise the quota or remove templates",
                object=team.ref,
            )


__all__ = [
    "DEFAULT_OPERATOR_NAMESPACE",
    "FLEET_NAMESPACE",
    "QuotaUse",
    "check",
    "namespace_owners",
    "quota_use",
    "reserved",
]
