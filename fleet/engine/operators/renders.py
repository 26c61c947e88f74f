"""The chart as objects: what ``diff`` shows under the release entry, and ``fleetctl render`` prints.

The chart is rendered by helm (``helm upgrade --dry-run=server``, so ``lookup`` and
``.Capabilities`` see the cluster; ``helm template`` with the cluster's API versions and
Kubernetes version (``capabilities``) while the chart's CRDs are not installed yet) and every
rendered object, CRDs first, is dry-run applied with the field manager that will own it
(``fleet`` for CRDs, ``helm`` for the rest) and compared with the live object as every
other diff is (``fleet.engine.normalizations``).
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio

from fleet import helm
from fleet.engine import normalizations
from fleet.engine.changesets import Action, Change
from fleet.engine.operators import capabilities
from fleet.engine.operators.releases import OperatorRefused, release_ref
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
    caps = await capabilities.from_cluster(client)
    served = set(caps.api_versions)
    # A server-side dry run cannot map the kinds of CRDs not installed yet (a first install): helm
    # would fail and fall back to ``template``, so render offline at once.
    missing = any(f"{api_version}/{kind}" not in served for api_version, kind in crd_scopes(chart_crds))
    try:
        objects_rendered = await rendered(h, chart, desired=desired, caps=caps, offline=missing)
    except helm.HelmError as err:
        ref = release_ref(release=desired.release, namespace=desired.namespace)
        return [Change(ref=ref, stage="operator", action=Action.SKIPPED, error=refusal(err, desired=desired))]
    scopes = crd_scopes(chart_crds)
    objects = [*chart_crds, *objects_rendered]
    found: list[Change | None] = [None] * len(objects)
    limiter = anyio.CapacityLimiter(8)

    async def one(i: int, obj: dict[str, Any]) -> None:
        async with limiter:
            found[i] = await _object_change(client, obj, scopes=scopes, served=served, namespace=desired.namespace)

    async with anyio.create_task_group() as tg:  # each object's get and dry run, 8 at a time
        for i, obj in enumerate(objects):
            tg.start_soon(one, i, obj)
    return [c for c in found if c is not None]


async def _object_change(
    client: Client,
    obj: dict[str, Any],
    *,
    scopes: dict[tuple[str, str], bool],
    served: set[str],
    namespace: str,
) -> Change | None:
    obj.setdefault("metadata", {})
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    known = obj.get("kind") == "CustomResourceDefinition" or f"{key[0]}/{key[1]}" in served
    if obj.get("kind") != "CustomResourceDefinition":
        # A kind only the chart's CRDs will add (GPUCluster before a first install) is not served
        # yet: its scope is the CRD's, never a guess (a cluster-scoped object has no namespace).
        namespaced = scopes.get(key, True)
        if known:
            with contextlib.suppress(NotFound):
                namespaced = (await client.kind(api_version=obj["apiVersion"], kind=obj["kind"])).namespaced
        if namespaced:
            obj["metadata"].setdefault("namespace", namespace)
    ref = Ref.of(obj)
    manager = "fleet" if obj.get("kind") == "CustomResourceDefinition" else "helm"
    live: dict[str, Any] | None = None
    merged = obj  # a kind the chart's CRDs will only add: shown as written
    if known:
        try:
            live = await client.get(ref)
        except (NotFound, KubeError):
            live = None
        with contextlib.suppress(KubeError):
            merged = await client.apply(obj, field_manager=manager, force=True, dry_run=True)
    before, after = normalizations.normalise(live), normalizations.normalise(merged)
    if before == after:
        return None
    return Change(
        ref=ref,
        stage="operator",
        action=Action.CONFIGURED if live else Action.CREATED,
        before=before,
        after=after,
    )


def crd_scopes(crds: list[dict[str, Any]]) -> dict[tuple[str, str], bool]:
    """(apiVersion, kind) → namespaced, for every version the CRDs serve."""
    out: dict[tuple[str, str], bool] = {}
    for crd in crds:
        spec = crd.get("spec") or {}
        kind = (spec.get("names") or {}).get("kind", "")
        for version in spec.get("versions") or ():
            out[(f"{spec.get('group')}/{version.get('name')}", kind)] = spec.get("scope") == "Namespaced"
    return out


async def rendered(
    h: helm.Helm,
    chart: helm.ChartRef,
    *,
    desired: OperatorRelease,
    caps: capabilities.Capabilities,
    offline: bool = True,
    include_crds: bool = False,
) -> list[dict[str, Any]]:
    """The chart's objects for the release's values against the cluster's capabilities: rendered
    offline (``helm template``), or by a server-side dry run (``offline=False``)."""
    given: dict[str, Any] = {
        "release": desired.release,
        "namespace": desired.namespace,
        "values": desired.values,
        "api_versions": caps.api_versions,
        "kube_version": caps.kube_version,
    }
    if not offline:
        return await h.render(chart, **given)
    return await h.template(chart, include_crds=include_crds, **given)


def refusal(err: helm.HelmError, *, desired: OperatorRelease) -> str:
    """A chart that refuses to render, in its own words, at the GPUOperator's file:line."""
    text = f"{err.what}\n{err.stderr}"
    marker = "execution error at ("
    if marker in text:
        at, _, message = text[text.index(marker) + len(marker) :].partition("): ")
        own = message.splitlines()[0].strip() if message else text
        return (
            f"{desired.source}: the chart refuses to render: {own} (at {at})\n"
            "  hint: change spec.values, or check that the cluster serves what the chart requires"
        )
    return f"{desired.source}: cannot render the chart: {err}"


async def offline(
    h: helm.Helm, *, chart: helm.ChartRef, desired: OperatorRelease
) -> tuple[list[dict[str, Any]], capabilities.Capabilities]:
    """The chart's CRDs and objects without a cluster: rendered against what the Cluster's
    ``kubernetesVersion`` serves by default. Raises ``ChartRefused`` (file:line) when it refuses."""
    caps = capabilities.for_minor(desired.kubernetes_version or sorted(capabilities.SERVED_BY_DEFAULT)[-1])
    try:
        crds = await h.crds(chart)
        objects = await rendered(h, chart, desired=desired, caps=caps)
    except helm.HelmError as err:
        what, _, hint = refusal(err, desired=desired).partition("\n  hint: ")
        kind = ChartRefused if "execution error at (" in f"{err.what}\n{err.stderr}" else ChartUnavailable
        hint = hint or "check that spec.chart.repository, name and version can be reached from here"
        raise kind(what.removeprefix(f"{desired.source}: "), where=desired.source, hint=hint) from err
    return [*crds, *objects], caps


class ChartUnavailable(OperatorRefused):
    """The operator's chart could not be rendered: fetched or read (a repository, a version, helm
    itself). An ``OperatorRefused``: ``apply`` raises it before anything is written."""


class ChartRefused(ChartUnavailable):
    """The operator's chart refuses to render: its own validation (or its values schema) failed, in its
    own words."""


__all__ = ["ChartRefused", "ChartUnavailable", "crd_scopes", "object_diff", "offline", "refusal"]
