"""Removal: a GPU Operator no longer declared is uninstalled, as a disruptive change like any other.

fleet removes only releases it installed (the Helm storage label
``app.kubernetes.io/managed-by=fleet``) and only with ``--prune``. ``found`` proposes each
removal; while ResourceClaims hold devices of the NVIDIA driver, the removal is disruptive
(``disruption``: the guide's clean-up order is workloads and claims first), so the run classes,
holds, drains and waves it as it does every disruptive change (``fleet.engine.operatorsteps``).
``uninstall`` runs ``helm uninstall`` (the chart's pre-delete hooks) for a ``write`` decision only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleet import helm
from fleet.engine import decisions, disruptions
from fleet.engine.changesets import Action, Change
from fleet.engine.operators.releases import release_ref, summary, visible_releases
from fleet.engine.operators.restarts import GPU_DRIVER, gpu_nodes


async def found(*, h: helm.Helm, prune: bool) -> list[Change]:
    """The releases fleet installed that the revision no longer declares: deleted (``prune``) or skipped."""
    try:
        from fleet.manifests.kinds import GPUOperatorSpec  # the models: only a removal needs its default

        releases = await visible_releases(h, namespace=GPUOperatorSpec.model_fields["namespace"].default)
        mine = [r for r in releases if r.chart_name == "gpu-operator"]
    except helm.HelmMissing:
        return []  # no helm here: nothing fleet could have installed with it
    except helm.HelmError as err:
        if not helm.forbidden(err):
            raise
        # This identity may not read helm's release record (the in-cluster base install, without
        # overlays/gpu-operator): it could not have installed a release, and removes none.
        return []
    changes: list[Change] = []
    for r in mine:
        if not await h.labels(name=r.name, namespace=r.namespace, revision=r.revision):
            continue  # not installed by fleet: never removed by fleet
        ref = release_ref(release=r.name, namespace=r.namespace)
        change = Change(ref=ref, stage="operator", action=Action.DELETED, before=summary(r, {}, chart="gpu-operator"))
        if not prune:
            change = change.replaced(
                action=Action.SKIPPED, reason="no longer declared; not uninstalled (--prune not given)"
            )
        changes.append(change)
    return changes


def disruption(
    *, slices: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]]
) -> disruptions.Disruption | None:
    """Why uninstalling disrupts GPU work: the claims that hold the driver's devices (None: none does)."""
    held = sorted(
        disruptions.claim_name(c)
        for c in claims
        if any(
            r.get("driver") == GPU_DRIVER for r in (disruptions.allocation(c).get("devices") or {}).get("results") or ()
        )
    )
    if not held:
        return None
    nodes = frozenset(n for c in claims if disruptions.claim_name(c) in held for n in disruptions.claim_nodes(c))
    return disruptions.Disruption(
        reason=f"uninstalling the GPU Operator removes the driver that {disruptions.listed(held)} hold "
        "(the guide's order: GPU workloads and claims first)",
        nodes=nodes or gpu_nodes(slices),
        claims=tuple(held),
    )


async def uninstall(*, h: helm.Helm, change: Change) -> Change:
    """``helm uninstall`` the release of ``change``, as its ``write`` decision says; the entry's result."""
    decisions.require(change.decision, what=change.ref)
    try:
        await h.uninstall(name=change.ref.name, namespace=change.ref.namespace)
    except helm.HelmError as err:
        return change.replaced(error=str(err))
    return change


__all__ = ["disruption", "found", "uninstall"]
