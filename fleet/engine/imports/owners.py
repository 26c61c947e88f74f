"""Who may own a team's namespace in the take-over: subjects whose rights there already include fleet's team Role.

The import takes a namespace's owners from its RoleBindings, and the take-over binds them to
fleet's team Role. A subject whose Roles and ClusterRoles in the namespace grant less (get and list
on claims only, say) would gain rights nobody gave it, so ``owners`` compares the rules verb by
verb: only subjects already holding every (resource, verb) the team Role grants become owners, and
every other subject is an IMPORT.md row naming what it would have gained.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from fleet.engine.imports.documents import Imported, Unmapped
from fleet.engine.imports.lives import Live
from fleet.engine.renders import CLAIM_RESOURCES, CLAIM_VERBS, TEAM_ROLE
from fleet.kube import Ref

TEAM_GRANTS = frozenset((resource, verb) for resource in CLAIM_RESOURCES for verb in CLAIM_VERBS)
"""What fleet's team Role grants in a team's namespace, as (resource, verb) of ``resource.k8s.io``."""


def granted(rules: Any) -> frozenset[tuple[str, str]]:
    """Which of ``TEAM_GRANTS`` ``rules`` (a Role's or ClusterRole's) grant, verb by verb, as RBAC reads
    them: ``*`` matches any group, resource or verb; a rule limited to ``resourceNames`` grants no
    request on the resource as a whole (a create, a list), so it counts for nothing here."""
    found: set[tuple[str, str]] = set()
    for rule in rules or ():
        if rule.get("resourceNames"):
            continue
        groups = set(rule.get("apiGroups") or ())
        if not groups & {"*", "resource.k8s.io"}:
            continue
        resources = set(rule.get("resources") or ())
        verbs = set(rule.get("verbs") or ())
        found |= {
            (r, v) for r, v in TEAM_GRANTS if (r in resources or "*" in resources) and (v in verbs or "*" in verbs)
        }
    return frozenset(found)


def _is_team_role(role: dict[str, Any]) -> bool:
    rules = role.get("rules") or []
    if len(rules) != 1:
        return False
    rule = rules[0]
    return (
        list(rule.get("apiGroups") or ()) == ["resource.k8s.io"]
        and list(rule.get("resources") or ()) == list(CLAIM_RESOURCES)
        and list(rule.get("verbs") or ()) == list(CLAIM_VERBS)
        and not rule.get("resourceNames")
    )


def owners(ns: str, *, live: Live, out: Imported) -> tuple[list[dict[str, str]], str]:
    """The subjects whose rights in ``ns`` already include all fleet's team Role grants: binding them to
    it grants nothing new. Every other subject is a row saying what it lacks; the import never makes a
    take-over grant rights that nobody had."""
    roles = {str(r["metadata"]["name"]): r for r in live.rights.roles if r["metadata"].get("namespace") == ns}
    cluster_roles = {str(r["metadata"]["name"]): r for r in live.rights.cluster_roles}
    rights: dict[tuple[str, ...], set[tuple[str, str]]] = defaultdict(set)
    via: dict[tuple[str, ...], list[str]] = defaultdict(list)
    subjects: dict[tuple[str, ...], dict[str, str]] = {}
    for binding in sorted(
        (b for b in live.rights.role_bindings if b["metadata"].get("namespace") == ns),
        key=lambda b: str(b["metadata"]["name"]),
    ):
        bname = str(binding["metadata"]["name"])
        ref = binding.get("roleRef") or {}
        kind, rname = str(ref.get("kind")), str(ref.get("name"))
        role = roles.get(rname) if kind == "Role" else cluster_roles.get(rname) if kind == "ClusterRole" else None
        grants = granted((role or {}).get("rules"))
        if bname == TEAM_ROLE and kind == "Role" and rname == TEAM_ROLE and role is not None and _is_team_role(role):
            out.handover[Ref("rbac.authorization.k8s.io/v1", "Role", ns, TEAM_ROLE).key] = "adopted"
            out.handover[Ref("rbac.authorization.k8s.io/v1", "RoleBinding", ns, TEAM_ROLE).key] = "adopted"
        for subject in binding.get("subjects") or ():
            owner = _owner(subject)
            if owner is None:
                continue
            key = tuple(owner.values())
            subjects.setdefault(key, owner)
            rights[key] |= grants
            via[key].append(f"{bname} ({kind} {rname}{'' if role is not None else ', not found'})")
    owners: list[dict[str, str]] = []
    notes: set[str] = set()
    for key, owner in subjects.items():
        missing = TEAM_GRANTS - rights[key]
        if not missing:
            owners.append(owner)
            notes.update(b.split(" (")[0] for b in via[key] if not b.startswith(f"{TEAM_ROLE} "))
            continue
        shown = _shown_subject(owner)
        out.unmapped.append(
            Unmapped(
                f"{shown} in namespace {ns}",
                f"not made an owner of team {ns}: its RoleBinding(s) there ({', '.join(via[key])}) do not grant "
                f"all that fleet's team Role grants; binding it to {TEAM_ROLE} would grant it "
                f"{_missing(missing)}, which nobody gave it. Its bindings stay as they are; add it to spec.owners "
                f"of teams/{ns}/team.yaml only if it should have those rights",
            )
        )
    kept = sorted(n for n in notes if n != TEAM_ROLE)
    note = f"owners from RoleBinding(s) {', '.join(kept)}, which stay as they are beside fleet's {TEAM_ROLE}"
    return owners, note if kept else ""


def _shown_subject(owner: dict[str, str]) -> str:
    if owner["kind"] == "ServiceAccount":
        return f"ServiceAccount {owner['namespace']}/{owner['name']}"
    return f"{owner['kind']} {owner['name']}"


def _missing(missing: frozenset[tuple[str, str]]) -> str:
    """``resourceclaims: create, delete; resourceclaimtemplates: ...``, verbs in fleet's order."""
    parts = []
    for resource in CLAIM_RESOURCES:
        verbs = [v for v in CLAIM_VERBS if (resource, v) in missing]
        if verbs:
            parts.append(f"{', '.join(verbs)} on {resource}")
    return "; ".join(parts)


def _owner(subject: dict[str, Any]) -> dict[str, str] | None:
    kind = str(subject.get("kind") or "")
    if kind not in ("Group", "User", "ServiceAccount"):
        return None
    owner = {"kind": kind, "name": str(subject.get("name") or "")}
    if kind == "ServiceAccount":
        owner["namespace"] = str(subject.get("namespace") or "")
    return owner


__all__ = ["TEAM_GRANTS", "granted", "owners"]
