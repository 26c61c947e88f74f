"""Removal: a GPU Operator no longer declared is uninstalled, never while claims hold its GPUs.

fleet removes only releases it installed (the Helm storage label
``app.kubernetes.io/managed-by=fleet``), only with ``--prune``, and only once no
ResourceClaim holds devices of the NVIDIA driver (the guide's clean-up order: workloads
and claims first). ``helm uninstall`` runs the chart's pre-delete hooks.
"""

from __future__ import annotations

from fleet import helm
from fleet.engine.changesets import Action, Change
from fleet.engine.operators.guards import allocated_claims, claims_block
from fleet.engine.operators.releases import release_ref, summary, visible_releases
from fleet.kube import Client


async def remove(*, client: Client, h: helm.Helm, prune: bool, dry_run: bool) -> list[Change]:
    """The operator is no longer declared: uninstall fleet's release, once no claim holds a GPU."""
    try:
        from fleet.manifests.kinds import GPUOperatorSpec  # the models: only a removal needs its default

        found = await visible_releases(h, namespace=GPUOperatorSpec.model_fields["namespace"].default)
        mine = [r for r in found if r.chart_name == "gpu-operator"]
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
        labelled = await h.labels(name=r.name, namespace=r.namespace, revision=r.revision)
        if not labelled:
            continue  # not installed by fleet: never removed by fleet
        ref = release_ref(release=r.name, namespace=r.namespace)
        change = Change(ref=ref, stage="operator", action=Action.DELETED, before=summary(r, {}, chart="gpu-operator"))
        if not prune:
            change.action = Action.SKIPPED
            change.reason = "no longer declared; not uninstalled (--prune not given)"
            changes.append(change)
            continue
        claims = await allocated_claims(client)
        if claims:
            reason, fix = claims_block(claims, what="removing")
            change.action = Action.SKIPPED
            change.refused = True
            change.error = f"{reason}\n  hint: {fix}"
            changes.append(change)
            continue
        changes.append(change)
        if dry_run:
            continue
        try:
            await h.uninstall(name=r.name, namespace=r.namespace)
        except helm.HelmError as err:
            change.error = str(err)
    return changes


__all__ = ["remove"]
