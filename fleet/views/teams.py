"""A team as people look for it: quota used and limit per DeviceClass, templates, and pending pods.

fleet labels each team's namespaces with ``fleet.gpufleet.dev/team`` (``fleet.engine.ownership``)
and gives each a ResourceQuota on ``<class>.deviceclass.resource.k8s.io/devices``; the API server
keeps that quota's ``used``. ``teams(...)`` reads those objects back (pure), and each pending pod
that asks for devices carries ``fleetctl explain``'s cause: ``fleet.inventory.pendings.explain``
is the one function both call, with ``claims_of`` to find the pod's claims as the scheduler does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet import cel
from fleet.engine.ownership import TEAM_LABEL
from fleet.inventory import pendings

Obj = Mapping[str, Any]
QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"


@dataclass(frozen=True)
class Quota:
    """Devices of one DeviceClass a team holds, and may hold."""

    device_class: str
    used: int
    hard: int


@dataclass(frozen=True)
class Pending:
    """A pod of the team waiting, and why (``fleetctl explain``'s cause)."""

    namespace: str
    name: str
    cause: pendings.Cause


@dataclass(frozen=True)
class Team:
    name: str
    namespaces: tuple[str, ...]
    quotas: tuple[Quota, ...]
    templates: tuple[str, ...]
    """``namespace/name`` of the team's ResourceClaimTemplates."""
    pending: tuple[Pending, ...]
    devices: int
    """Devices allocated to the team's claims."""


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _count(raw: object) -> int:
    try:
        return int(cel.parse_quantity(str(raw)).value)
    except (ValueError, TypeError):  # a quantity the API server would not have stored
        return 0


def quotas(resource_quotas: Sequence[Obj]) -> list[Quota]:
    """Device quotas of ResourceQuotas (one namespace's or a team's), summed per DeviceClass."""
    hard: dict[str, int] = {}
    used: dict[str, int] = {}
    for quota in resource_quotas:
        status = quota.get("status") or {}
        limits = status.get("hard") or (quota.get("spec") or {}).get("hard") or {}
        for key, value in limits.items():
            if key.endswith(QUOTA_SUFFIX):
                name = key.removesuffix(QUOTA_SUFFIX)
                hard[name] = hard.get(name, 0) + _count(value)
                used[name] = used.get(name, 0) + _count((status.get("used") or {}).get(key, 0))
    return [Quota(name, used[name], hard[name]) for name in sorted(hard)]


def claims_of(pod: Obj, claims: Mapping[str, Obj], templates: Mapping[str, Obj]) -> list[Obj]:
    """The claims ``pod`` asks for: by name, by the name the controller generated from a template,
    else (not generated yet) the template's claim spec under a name that says so. ``claims`` and
    ``templates`` are the pod's namespace's, by name."""
    namespace = str(_meta(pod).get("namespace") or "")
    generated = {
        s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
    }
    found: list[Obj] = []
    for ref in (pod.get("spec") or {}).get("resourceClaims") or ():
        name = ref.get("resourceClaimName") or generated.get(ref.get("name"))
        if name and name in claims:
            found.append(claims[name])
        elif ref.get("resourceClaimTemplateName") in templates:
            template = templates[ref["resourceClaimTemplateName"]]
            found.append(
                {
                    "metadata": {"name": f"(from template {ref['resourceClaimTemplateName']})", "namespace": namespace},
                    "spec": (template.get("spec") or {}).get("spec"),
                }
            )
    return found


def namespace_teams(namespaces: Sequence[Obj]) -> dict[str, str]:
    """Namespace → the fleet team it belongs to (its ``fleet.gpufleet.dev/team`` label)."""
    out = {}
    for ns in namespaces:
        meta = _meta(ns)
        team = (meta.get("labels") or {}).get(TEAM_LABEL)
        if team:
            out[str(meta.get("name"))] = str(team)
    return out


def _by_namespace(objects: Sequence[Obj]) -> dict[str, dict[str, Obj]]:
    out: dict[str, dict[str, Obj]] = {}
    for obj in objects:
        meta = _meta(obj)
        out.setdefault(str(meta.get("namespace") or ""), {})[str(meta.get("name") or "")] = obj
    return out


def teams(
    *,
    namespaces: Sequence[Obj],
    resource_quotas: Sequence[Obj],
    templates: Sequence[Obj],
    pods: Sequence[Obj],
    claims: Sequence[Obj],
    classes: Sequence[Obj],
    slices: Sequence[Obj],
    nodes: Sequence[Obj],
    events: Sequence[Obj] = (),
) -> list[Team]:
    """Every team with a namespace in the cluster, by name."""
    team_of = namespace_teams(namespaces)
    members: dict[str, list[str]] = {}
    for namespace, team in team_of.items():
        members.setdefault(team, []).append(namespace)
    quotas_in = _by_namespace(resource_quotas)
    templates_in = _by_namespace(templates)
    claims_in = _by_namespace(claims)
    by_class = {str(_meta(c).get("name")): c for c in classes}
    events_of: dict[tuple[str, str], list[Obj]] = {}
    for event in events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        if involved.get("kind") == "Pod":
            events_of.setdefault((str(involved.get("namespace")), str(involved.get("name"))), []).append(event)
    out: list[Team] = []
    for name in sorted(members):
        spaces = tuple(sorted(members[name]))
        pending: list[Pending] = []
        for pod in pods:
            meta = _meta(pod)
            namespace = str(meta.get("namespace") or "")
            if namespace not in spaces or (pod.get("status") or {}).get("phase") != "Pending":
                continue
            if not (pod.get("spec") or {}).get("resourceClaims"):
                continue
            asked = claims_of(pod, claims_in.get(namespace, {}), templates_in.get(namespace, {}))
            cause = pendings.explain(
                pod=pod,
                claims=asked,
                all_claims=claims,
                classes=by_class,
                slices=slices,
                nodes=nodes,
                events=events_of.get((namespace, str(meta.get("name"))), ()),
                teams=team_of,
            )
            pending.append(Pending(namespace, str(meta.get("name")), cause))
        held = sum(
            len((((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ())
            for ns in spaces
            for c in claims_in.get(ns, {}).values()
        )
        out.append(
            Team(
                name=name,
                namespaces=spaces,
                quotas=tuple(quotas([q for ns in spaces for q in quotas_in.get(ns, {}).values()])),
                templates=tuple(f"{ns}/{t}" for ns in spaces for t in sorted(templates_in.get(ns, {}))),
                pending=tuple(sorted(pending, key=lambda p: (p.namespace, p.name))),
                devices=held,
            )
        )
    return out


__all__ = ["QUOTA_SUFFIX", "Pending", "Quota", "Team", "claims_of", "namespace_teams", "quotas", "teams"]
