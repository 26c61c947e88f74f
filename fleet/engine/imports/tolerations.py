"""Pure: whether taking a DeviceTaintRule over changes which claims its taint keeps off or evicts.

fleet's rules carry one taint, ``fleet.gpufleet.dev/maintenance=<maintenance>``. A rule made by hand
carries its own key and value, and claims may tolerate it (a burn-in job that must run on the GPU
under repair, say): a device toleration names a key, and with ``Equal`` a value. Taking the rule
over rewrites key and value (the effect stays, and with it the eviction's clock, ``timeAdded``), so
the import allows it only where no live ResourceClaim or template has a request whose tolerations
tolerate the one taint and not the other at ``NoSchedule`` or ``NoExecute`` (Kubernetes'
``ToleratesTaint``, ``fleet.inventory.matches.tolerates``); otherwise the rule stays a person's,
and the IMPORT.md row names the claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleet.engine import maintenances as fleet_rules
from fleet.engine.imports.lives import Live
from fleet.inventory.matches import tolerates
from fleet.inventory.requests import read_claim

Obj = Mapping[str, Any]
Tolerations = list[tuple[str, tuple[Obj, ...]]]
"""Who (``ResourceClaim ns/name``) and one request's tolerations."""

ENFORCED = ("NoSchedule", "NoExecute")
"""The effects a toleration matters for."""


def of(live: Live) -> Tolerations:
    """The device tolerations of every request of the live claims and templates, by whose they are."""
    out: Tolerations = []
    for kind, objs in (("ResourceClaim", live.claims), ("ResourceClaimTemplate", live.templates)):
        for obj in objs:
            spec = obj.get("spec") or {}
            shape, _ = read_claim((spec.get("spec") or {}) if kind == "ResourceClaimTemplate" else spec)
            meta = obj["metadata"]
            who = f"{kind} {meta.get('namespace')}/{meta['name']}"
            out += [(who, a.tolerations) for alternatives in shape.requests for a in alternatives if a.tolerations]
    return out


def told_apart(
    old: Mapping[str, str], new: Mapping[str, str], tolerations: Iterable[tuple[str, tuple[Obj, ...]]]
) -> list[str]:
    """Who tolerates one taint (key, value) and not the other, at an effect that keeps claims off or evicts."""
    whose = {
        who
        for who, tols in tolerations
        for effect in ENFORCED
        if tolerates(tols, {**old, "effect": effect}) != tolerates(tols, {**new, "effect": effect})
    }
    return sorted(whose)


def taken_over(maintenance: str, rules: list[dict[str, Any]], *, tolerations: Tolerations) -> tuple[list[str], str]:
    """The rules whose taint becomes fleet's (``name (key=value)``), and why they may not ("" when they may)."""
    changed: list[str] = []
    told: dict[str, list[str]] = {}
    new = {"key": fleet_rules.TAINT_KEY, "value": maintenance}
    for rule in rules:
        taint = (rule.get("spec") or {}).get("taint") or {}
        old = {"key": str(taint.get("key") or ""), "value": str(taint.get("value") or "")}
        if old == new:
            continue
        name = str(rule["metadata"]["name"])
        changed.append(f"{name} ({text(taint)})")
        whose = told_apart(old, new, tolerations)
        if whose:
            told[name] = whose
    if not told:
        return changed, ""
    shown = "; ".join(f"{rule}: {', '.join(whose)}" for rule, whose in sorted(told.items()))
    return changed, (
        f"its taint is not fleet's ({fleet_rules.TAINT_KEY}={maintenance}), and claims tolerate one and not the "
        f"other ({shown}): taking it over would change which claims the devices keep or evict; it stays as it is. "
        "Change those tolerations (or end the maintenance by hand) and import again"
    )


def text(taint: Mapping[str, Any]) -> str:
    """``key=value`` (``key`` without a value)."""
    key, value = str(taint.get("key") or ""), str(taint.get("value") or "")
    return f"{key}={value}" if value else key


__all__ = ["ENFORCED", "Tolerations", "of", "taken_over", "text", "told_apart"]
