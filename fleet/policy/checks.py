"""All checks over a revision, as one sorted list of findings.

Structural rules run once on the revision as written; tenancy, operator and
CEL rules run on each cluster's view (after its overlays), because quotas,
values and even selectors may differ per cluster. A finding that appears in
every checked cluster is reported once without a cluster; one that appears
only for some clusters names them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from fleet.manifests import Finding, Manifest, Revision, cluster_names, kinds, resolve
from fleet.policy import (
    declarations,
    extendedresources,
    featuregates,
    maintenances,
    operators,
    pools,
    satisfiability,
    selectors,
    structures,
    tenancy,
)

if TYPE_CHECKING:
    from fleet.inventory import Inventory


@dataclass(frozen=True)
class Result:
    """What validating a revision found, and how its claims fare on the given inventories."""

    findings: list[Finding]
    satisfaction: list[satisfiability.Satisfaction]


def check(
    revision: Revision,
    *,
    clusters: Sequence[str] = (),
    compiler: selectors.Compiler | None = selectors.dra_compiler,
) -> list[Finding]:
    """Every finding of ``revision``, for ``clusters`` (default: all clusters)."""
    return validate(revision, clusters=clusters, compiler=compiler, declared=False).findings


def validate(
    revision: Revision,
    *,
    clusters: Sequence[str] = (),
    inventories: Mapping[str, Inventory] | None = None,
    sources: Mapping[str, str] | None = None,
    live: Mapping[str, satisfiability.Live] | None = None,
    declared: bool = True,
    compiler: selectors.Compiler | None = selectors.dra_compiler,
    features: Mapping[str, featuregates.ClusterFeatures] | None = None,
) -> Result:
    """:func:`check`, plus satisfiability of every claim on each cluster's devices.

    Devices come from ``inventories`` (``sources`` names them: ``snapshot FILE``, ``live context CTX``)
    or, for the other clusters and with ``declared``, from the cluster's GPUNodePools
    (:mod:`fleet.policy.declarations`). ``live`` (per cluster, from ``--context``) adds how many
    copies fit right now and which claims block a template that fits ever but not now.
    ``features`` (per cluster, from ``--context``) replaces what a Cluster declares about its
    Kubernetes version and feature gates (:mod:`fleet.policy.featuregates`).
    """
    inventories = inventories or {}
    sources = sources or {}
    satisfaction: list[satisfiability.Satisfaction] = []
    found: list[Finding] = [*revision.findings, *structures.check(revision), *maintenances.references(revision)]
    names = list(clusters) or cluster_names(revision)
    per_cluster: list[tuple[str, list[Finding]]] = []
    base = [m for m in revision.manifests if m.model is not None]
    owners = tenancy.namespace_owners(base)
    pools = {m.name for m in revision.of_kind("GPUNodePool")}
    if not names:
        found.extend(view_findings(base, owners=owners, compiler=compiler))
    broken = {f.location.file for f in revision.findings if f.severity == "error"}
    for name in names:
        if name not in cluster_names(revision) and f"clusters/{name}.yaml" in broken:
            continue  # its file does not load: already a finding, nothing to resolve
        view = resolve(revision, cluster=name)
        gates = (features or {}).get(name) or featuregates.declared(view.cluster)
        findings = [
            *view.findings,
            *view_findings(view.manifests, owners=owners, compiler=compiler, features=gates),
        ]
        inventory, source = inventories.get(name), sources.get(name, "snapshot")
        held = (live or {}).get(name)
        devices = None
        if inventory is not None:
            devices = maintenances.published_devices(view, inventory, source=source, live=held)
        elif declared:
            pooled = declarations.declared(view)
            findings.extend(pooled.findings)
            inventory, source = pooled.inventory, declarations.SOURCE
            devices = maintenances.declared_devices(view, pooled)
        on_devices = maintenances.judge(view, devices=devices, pools=pools) if devices is not None else []
        if inventory is not None:
            inventory_findings, satisfied = satisfiability.evaluate(view, inventory=inventory, source=source, live=held)
            on_devices.extend(inventory_findings)
            satisfaction.extend(satisfied)
        removed = {f.location for f in findings if f.rule == "cel-removed-attribute"}
        findings.extend(f for f in on_devices if not (f.rule == "cel-unknown-attribute" and f.location in removed))
        per_cluster.append((name, findings))
    found.extend(_merge(per_cluster))
    return Result(findings=sorted(set(found)), satisfaction=satisfaction)


def view_findings(
    manifests: Sequence[Manifest],
    *,
    owners: Mapping[str, str],
    compiler: selectors.Compiler | None,
    features: featuregates.ClusterFeatures | None = None,
) -> Iterator[Finding]:
    """The rules that depend on what one cluster gets (``features``: its version and gates)."""
    yield from tenancy.check(manifests, owners=owners)
    yield from pools.check(manifests)
    yield from featuregates.check(manifests, features=features)
    yield from maintenances.check(manifests, features=features)
    yield from extendedresources.check(manifests)
    for manifest in manifests:
        if isinstance(manifest.model, kinds.GPUOperator):
            yield from operators.check(manifest)
        if manifest.kind in ("DeviceClass", "ResourceClaimTemplate", "ResourceClaim", "GPUMaintenance"):
            lists = features is not None and features.on("DRAListTypeAttributes")
            yield from selectors.check(manifest, compiler=compiler, lists=lists)


def _merge(per_cluster: Iterable[tuple[str, list[Finding]]]) -> list[Finding]:
    clusters: dict[Finding, list[str]] = {}
    names: list[str] = []
    for name, findings in per_cluster:
        names.append(name)
        for finding in findings:
            clusters.setdefault(replace(finding, cluster=""), []).append(name)
    return [
        f if sorted(set(c)) == sorted(names) else replace(f, cluster=",".join(sorted(set(c))))
        for f, c in clusters.items()
    ]


__all__ = ["Result", "check", "validate", "view_findings"]
