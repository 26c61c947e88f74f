"""Pure: a cluster set up by hand (``lives.Live``) → the fleet repository that declares it.

The promise is that the repository diffs to zero against the cluster it came
from, so every object is written as fleet would render it, or left out and
listed (``Unmapped``) with the reason: nothing is dropped silently, and nothing
is written that fleet would apply differently. Pools (``pools``), teams
(``teams``) and maintenances (``maintenances``, from the DeviceTaintRules) have
modules of their own; this one writes ``fleet.yaml``, the Cluster (its minor, and
the DRA gates and API versions that differ from that minor's defaults), the
GPUOperator (chart, version and the user-supplied values from helm's record) and
the DeviceClasses. Objects fleet already manages are listed, not imported again.

``Imported.handover`` says, per object, what the import's first apply records in
the ledger: the objects people made with kubectl (templates, claims, DeviceTaintRules)
become fleet's (``created``: pruning deletes them); namespaces, classes, RBAC and quotas are
``adopted`` (pruning releases them, never deletes them).
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from typing import Any

from fleet.engine import ownership
from fleet.engine.imports.documents import Document, Imported, Unmapped, annotate, clean, origin
from fleet.engine.imports.lives import DRA_API, HelmRelease, Live
from fleet.engine.imports.maintenances import maintenances, taint_rules
from fleet.engine.imports.pools import pools
from fleet.engine.imports.teams import teams
from fleet.kube import Ref
from fleet.manifests import kinds
from fleet.policy import featuregates, tenancy

DEFAULT_CHART_REPOSITORY = str(kinds.Chart.model_fields["repository"].default)
UNDECLARED_REASON = "a fleet repository declares no such object; it stays as it is"
UNDECLARED_REASONS = {
    "DeviceTaintRule": "this cluster has no DeviceTaintRule API a GPUMaintenance is carried out through "
    "(Kubernetes 1.37; 1.35 and 1.36 with it served and DRADeviceTaintRules on); it stays as it is. Import again "
    "once it has one",
}
"""Why an object of ``lives.UNDECLARED`` kinds is a row (a DeviceTaintRule fleet can carry is not: ``maintenances``)."""


def imported(
    live: Live, *, cluster: str, fleet: str, context: str, chart_repository: str = DEFAULT_CHART_REPOSITORY
) -> Imported:
    """The repository that declares ``live`` as cluster ``cluster`` of fleet ``fleet``."""
    out = Imported()
    out.documents.append(_fleet(fleet, cluster))
    out.documents.append(_cluster(live, cluster=cluster, context=context, out=out))
    operator_ns = kinds.GPUOperatorSpec.model_fields["namespace"].default
    if live.operator is not None:
        operator_ns = live.operator.namespace
        _operator(live.operator, chart_repository=chart_repository, out=out)
    elif live.helm_problem:
        out.unmapped.append(Unmapped("the GPU Operator release", live.helm_problem))
    classes = {str(c["metadata"]["name"]): c for c in _not_fleets(live.device_classes, out)}
    rules = taint_rules(live)
    seen = {f"{o['kind']} {o['metadata']['name']}" for o in rules}  # GPUMaintenances (``maintenances``)
    for o in live.others:
        name = f"{o['kind']} {o['metadata']['name']}"
        if name not in seen:  # served under several versions: one row
            seen.add(name)
            out.unmapped.append(Unmapped(name, UNDECLARED_REASONS.get(o["kind"], UNDECLARED_REASON)))
    _workloads(live, operator_ns=str(operator_ns), out=out)
    templates = _not_fleets(live.templates, out)
    claims = _not_fleets(live.claims, out)
    for name, obj in sorted(classes.items()):
        body = clean(obj)
        annotate(body, ownership.ADOPT, ownership.ADOPT_VALUE)
        out.documents.append(Document(f"deviceclasses/{name}.yaml", body, origin("DeviceClass", name, obj, context)))
        out.handover[Ref.of(body).key] = "adopted"
    pools(live, cluster=cluster, out=out)
    maintenances(live, rules=_not_fleets(rules, out), cluster=cluster, context=context, out=out)
    teams(
        live,
        templates=templates,
        claims=claims,
        cluster=cluster,
        context=context,
        classes=classes,
        operator_ns=str(operator_ns),
        out=out,
    )
    return out


def _workloads(live: Live, *, operator_ns: str, out: Imported) -> None:
    """One row for the Deployments and Pods people run (Kubernetes' and the operator's own aside)."""
    counts: Counter[str] = Counter()
    namespaces: set[str] = set()
    for o in live.workloads:
        ns = str(o["metadata"].get("namespace") or "")
        if not tenancy.reserved(ns, operator_namespace=operator_ns):
            counts[str(o["kind"])] += 1
            namespaces.add(ns)
    if counts:
        shown = " and ".join(f"{counts[k]} {k}(s)" for k in ("Deployment", "Pod") if counts[k])
        out.unmapped.append(
            Unmapped(
                "Deployments and Pods",
                f"{shown} in namespace(s) {', '.join(sorted(namespaces))}: a fleet repository declares the "
                "ResourceClaimTemplates and ResourceClaims they use, not the workloads themselves; they stay as "
                "they are",
            )
        )


def _not_fleets(objs: list[dict[str, Any]], out: Imported) -> list[dict[str, Any]]:
    """``objs`` without those fleet manages already (another cluster's name, or this one's imported before)."""
    kept: list[dict[str, Any]] = []
    for o in objs:
        if not ownership.managed(o):
            kept.append(o)
            continue
        meta = o["metadata"]
        name = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])
        cluster = (meta.get("labels") or {}).get(ownership.CLUSTER_LABEL, "?")
        out.unmapped.append(Unmapped(f"{o['kind']} {name}", f"fleet manages it already, as part of cluster {cluster}"))
    return kept


def _fleet(name: str, cluster: str) -> Document:
    body = {
        "apiVersion": kinds.API_VERSION,
        "kind": "Fleet",
        "metadata": {"name": name},
        "spec": {"clusters": [cluster]},
    }
    return Document("fleet.yaml", body, "written by fleetctl import")


def _cluster(live: Live, *, cluster: str, context: str, out: Imported) -> Document:
    gates = explicit_gates(live.features)
    spec: dict[str, Any] = {"kubernetesVersion": f"1.{live.minor}", "context": context}
    if gates:
        spec["featureGates"] = gates
    apis = sorted(v for v in live.features.apis if v.startswith("resource.k8s.io/") and v != DRA_API)
    if apis:
        spec["apiVersions"] = apis
    if featuregates.effective(live.minor, gates) != live.features.enabled:
        out.unmapped.append(
            Unmapped(
                f"the feature gates of context {context}",
                "the gates seen on the cluster are no combination fleet's table allows at 1."
                f"{live.minor}: spec.featureGates holds the ones that differ from the defaults",
            )
        )
    body = {"apiVersion": kinds.API_VERSION, "kind": "Cluster", "metadata": {"name": cluster}, "spec": spec}
    return Document(f"clusters/{cluster}.yaml", body, f"context {context}: version and DRA feature gates as seen")


def explicit_gates(features: featuregates.ClusterFeatures) -> dict[str, bool]:
    """The DRA gates whose state on the cluster differs from its minor's defaults."""
    defaults = featuregates.effective(features.minor, {})
    out: dict[str, bool] = {}
    for name, gate in sorted(featuregates.GATES.items()):
        spec = gate.spec(features.minor)
        if spec is None or spec.locked:
            continue
        if (name in features.enabled) != (name in defaults):
            out[name] = name in features.enabled
    return out


def _operator(release: HelmRelease, *, chart_repository: str, out: Imported) -> None:
    what = f"Helm release {release.namespace}/{release.name}"
    if release.status != "deployed":
        out.unmapped.append(
            Unmapped(what, f"its status is {release.status}: fleet would upgrade it; fix the release and import again")
        )
        return
    if not re.match(r"^v?[0-9]+\.[0-9]+\.[0-9]+", release.version):
        out.unmapped.append(Unmapped(what, f"chart version {release.version!r} is no semantic version"))
        return
    driver = release.values.get("driver")
    preinstalled = isinstance(driver, dict) and driver.get("enabled") is False
    spec: dict[str, Any] = {
        "chart": {"repository": chart_repository, "name": release.chart, "version": release.version},
        "namespace": release.namespace,
        "installPath": "preinstalledDriver" if preinstalled else "gpuCluster",
    }
    if release.name != kinds.GPUOperatorSpec.model_fields["release"].default:
        spec["release"] = release.name
    if release.values:
        spec["values"] = copy.deepcopy(release.values)
    body = {"apiVersion": kinds.API_VERSION, "kind": "GPUOperator", "metadata": {"name": release.name}, "spec": spec}
    comment = (
        f"{what}: chart {release.chart} {release.version} and the values its user supplied "
        "(helm get values); helm's record keeps no repository, so spec.chart.repository is the one given "
        "to fleetctl import"
    )
    out.documents.append(Document("operator/gpu-operator.yaml", body, comment))


__all__ = [
    "DEFAULT_CHART_REPOSITORY",
    "Document",
    "Imported",
    "Unmapped",
    "clean",
    "explicit_gates",
    "imported",
]
