"""The chart as objects: what ``diff`` shows under the release entry.

The chart is rendered by helm (``helm upgrade --dry-run=server``, so ``lookup`` sees the
cluster; offline ``helm template`` while the chart's CRDs are not installed yet) and every
rendered object, CRDs first, is dry-run applied with the field manager that will own it
(``fleet`` for CRDs, ``helm`` for the rest) and compared with the live object as every
other diff is (``fleet.engine.normalizations``).
"""

from __future__ import annotations

import contextlib
from typing import Any

from fleet import helm
from fleet.engine import normalizations
from fleet.engine.changesets import Action, Change
from fleet.engine.operators.releases import release_ref
from fleet.engine.plans import OperatorRelease
from fleet.kube import Client, KubeError, NotFound, Ref


async def object_diff(
    *,
    client: Client,
    h: helm.Helm,
    chart: helm.ChartRef,
    desired: OperatorRelease,
    chart_crds: list[dict[str, Any]],
) -> list[Change]:
    """The rendered chart (CRDs first) against live objects, each through a server-side apply dry-run."""
    try:
        rendered = await h.render(chart, release=desired.release, namespace=desired.namespace, values=desired.values)
    except helm.HelmError as err:
        ref = release_ref(release=desired.release, namespace=desired.namespace)
        return [Change(ref=ref, stage="operator", action=Action.SKIPPED, error=f"cannot render the chart: {err}")]
    out = []
    for obj in [*chart_crds, *rendered]:
        obj.setdefault("metadata", {})
        if obj.get("kind") != "CustomResourceDefinition":
            namespaced = True
            with contextlib.suppress(NotFound):
                namespaced = (await client.kind(api_version=obj["apiVersion"], kind=obj["kind"])).namespaced
            if namespaced:
                obj["metadata"].setdefault("namespace", desired.namespace)
        ref = Ref.of(obj)
        manager = "fleet" if obj.get("kind") == "CustomResourceDefinition" else "helm"
        try:
            live: dict[str, Any] | None = await client.get(ref)
        except (NotFound, KubeError):
            live = None
        try:
            merged = await client.apply(obj, field_manager=manager, force=True, dry_run=True)
        except KubeError:
            merged = obj  # a kind the chart's CRDs will only add: shown as written
        before, after = normalizations.normalise(live), normalizations.normalise(merged)
        if before == after:
            continue
        out.append(
            Change(
                ref=ref,
                stage="operator",
                action=Action.CONFIGURED if live else Action.CREATED,
                before=before,
                after=after,
            )
        )
    return out


__all__ = ["object_diff"]
