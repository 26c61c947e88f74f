"""What one cluster gets: the revision after that cluster's overlays.

``resolve(revision, cluster=...)`` is the hand-over point to the engine and
``fleetctl render``: a :class:`ClusterView` holds the Fleet, the Cluster, the
GPUOperator (Helm values patched), the pools and teams whose ``clusters``
selector matches, every DeviceClass, and the ResourceClaimTemplates and
ResourceClaims of the selected teams — each a :class:`Manifest` that still
knows the file and line of every field, from the base or from the overlay
that changed it.

Overlays apply base → every overlay whose selector matches the cluster, in
``metadata.name`` order. A patch that names an object which does not exist,
tries to change an object's identity, or leaves it invalid is a finding
located in the overlay; the object then stays as the base had it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from fleet.errors import FleetError
from fleet.manifests import kinds, maintenances, registry
from fleet.manifests.findings import Finding
from fleet.manifests.patches import merge
from fleet.manifests.revisions import Manifest, Revision
from fleet.manifests.validations import findings_from

_IDENTITY_FIELDS = ("apiVersion", "kind")


@dataclass(frozen=True)
class ClusterView:
    """The objects one cluster should have, after overlays, with their locations."""

    cluster: Manifest
    fleet: Manifest | None
    manifests: tuple[Manifest, ...]
    overlays: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = field(default=())

    @property
    def name(self) -> str:
        return self.cluster.name

    def of_kind(self, kind: str) -> list[Manifest]:
        return [m for m in self.manifests if m.kind == kind]

    @property
    def operator(self) -> Manifest | None:
        found = self.of_kind("GPUOperator")
        return found[0] if found else None

    @property
    def teams(self) -> list[Manifest]:
        return self.of_kind("Team")

    @property
    def pools(self) -> list[Manifest]:
        return self.of_kind("GPUNodePool")

    @property
    def maintenances(self) -> list[Manifest]:
        return self.of_kind("GPUMaintenance")

    @property
    def device_classes(self) -> list[Manifest]:
        return self.of_kind("DeviceClass")

    @property
    def claims(self) -> list[Manifest]:
        """ResourceClaimTemplates and ResourceClaims of the selected teams."""
        return [m for m in self.manifests if m.kind in ("ResourceClaimTemplate", "ResourceClaim")]


def cluster_names(revision: Revision) -> list[str]:
    """Names of the Cluster objects of a revision, sorted."""
    return sorted(m.name for m in revision.of_kind("Cluster"))


def resolve(revision: Revision, *, cluster: str) -> ClusterView:
    """The view of ``cluster``; raises FleetError if there is no such Cluster."""
    clusters = {m.name: m for m in revision.of_kind("Cluster")}
    if cluster not in clusters:
        known = ", ".join(sorted(clusters)) or "none"
        raise FleetError(f"no Cluster named {cluster!r} in the repository", hint=f"known clusters: {known}")
    target = clusters[cluster]
    labels = target.model.metadata.labels if isinstance(target.model, kinds.Cluster) else {}
    overlays = sorted(
        (
            m
            for m in revision.of_kind("Overlay")
            if isinstance(m.model, kinds.Overlay) and m.model.spec.clusters.matches(name=cluster, labels=labels)
        ),
        key=lambda m: m.name,
    )
    base = [m for m in revision.manifests if m.model is not None and m.kind not in ("Overlay", "Cluster")]
    findings: list[Finding] = []
    for overlay in overlays:
        base = _apply(overlay, manifests=base, cluster=cluster, findings=findings)
    fleets = [m for m in base if m.kind == "Fleet"]
    teams = {m.team: m for m in base if m.kind == "Team" and m.team is not None}
    selected_teams = {folder for folder, team in teams.items() if _selects(team, cluster, labels)}
    chosen = [target]
    for manifest in base:
        if manifest.kind in ("Team", "GPUNodePool", "GPUMaintenance"):
            if _selects(manifest, cluster, labels):
                chosen.append(manifest)
        elif manifest.kind in ("ResourceClaimTemplate", "ResourceClaim"):
            if manifest.team in selected_teams:
                chosen.append(manifest)
        elif manifest.kind != "Fleet":
            chosen.append(manifest)
    return ClusterView(
        cluster=target,
        fleet=fleets[0] if fleets else None,
        manifests=tuple(chosen),
        overlays=tuple(m.name for m in overlays),
        findings=tuple(findings),
    )


def _selects(manifest: Manifest, cluster: str, labels: dict[str, str]) -> bool:
    model = manifest.model
    if isinstance(model, kinds.Team | kinds.GPUNodePool):
        return model.spec.clusters.matches(name=cluster, labels=labels)
    if isinstance(model, maintenances.GPUMaintenance):
        folder = maintenances.folder_cluster(manifest.file)
        if folder is not None and folder != cluster:
            return False
        return model.spec.clusters.matches(name=cluster, labels=labels)
    return True


def _apply(overlay: Manifest, *, manifests: list[Manifest], cluster: str, findings: list[Finding]) -> list[Manifest]:
    assert isinstance(overlay.model, kinds.Overlay)
    spec = overlay.model.spec
    result = list(manifests)
    for index, patch in enumerate(spec.patches):
        path = ("spec", "patches", index)
        t = patch.target
        matches = [
            i
            for i, m in enumerate(result)
            if (m.api_version, m.kind, m.name, m.namespace) == (t.api_version, t.kind, t.name, t.namespace)
        ]
        where = overlay.positions.at((*path, "target"))
        if not matches:
            ref = "/".join(p for p in (t.kind, t.namespace or "", t.name) if p)
            findings.append(
                Finding(
                    where,
                    "overlay-target",
                    f"patch target {t.api_version} {ref} does not exist",
                    hint="check apiVersion, kind, namespace and name of the target",
                    object=f"Overlay/{overlay.name}",
                    cluster=cluster,
                )
            )
            continue
        if any(k in patch.patch for k in _IDENTITY_FIELDS) or (
            isinstance(patch.patch.get("metadata"), dict) and ({"name", "namespace"} & set(patch.patch["metadata"]))
        ):
            findings.append(
                Finding(
                    overlay.positions.at((*path, "patch")),
                    "overlay-patch",
                    "a patch cannot change apiVersion, kind, name or namespace",
                    hint="declare a different object in the base instead",
                    object=f"Overlay/{overlay.name}",
                    cluster=cluster,
                )
            )
            continue
        i = matches[0]
        result[i] = _patched(
            result[i],
            prefix=(),
            body=patch.patch,
            overlay=overlay,
            body_path=(*path, "patch"),
            cluster=cluster,
            findings=findings,
        )
    if spec.values is not None:
        operators = [i for i, m in enumerate(result) if m.kind == "GPUOperator"]
        if not operators:
            findings.append(
                Finding(
                    overlay.positions.at(("spec", "values")),
                    "overlay-target",
                    "values patch but the repository has no GPUOperator",
                    hint="add operator/gpu-operator.yaml or remove values",
                    object=f"Overlay/{overlay.name}",
                    cluster=cluster,
                )
            )
        for i in operators:
            result[i] = _patched(
                result[i],
                prefix=("spec", "values"),
                body=spec.values,
                overlay=overlay,
                body_path=("spec", "values"),
                cluster=cluster,
                findings=findings,
            )
    return result


def _patched(
    manifest: Manifest,
    *,
    prefix: tuple[str, ...],
    body: dict[str, Any],
    overlay: Manifest,
    body_path: tuple[str | int, ...],
    cluster: str,
    findings: list[Finding],
) -> Manifest:
    target: Any = manifest.data
    for key in prefix:
        target = target.get(key, {}) if isinstance(target, dict) else {}
    patched, positions = merge(
        target=target,
        patch=body,
        positions=manifest.positions,
        patch_positions=overlay.positions.under(body_path),
        prefix=prefix,
    )
    data = _set(dict(manifest.data), prefix, patched) if prefix else patched
    model_class = registry.MODELS[(manifest.api_version, manifest.kind)]
    try:
        model = model_class.model_validate(data)
    except ValidationError as err:
        for finding in findings_from(err, model=model_class, positions=positions, obj=manifest.ref):
            findings.append(
                replace(finding, cluster=cluster, message=f"{finding.message} (after overlay {overlay.name})")
            )
        return manifest
    # What a team's overlay patched is the team's as much as the file it patched: it is written as
    # the team (``fleet.engine.impersonations``), never with the rights of the file's owner.
    team = overlay.team if overlay.team is not None else manifest.team
    return replace(manifest, data=data, positions=positions, model=model, team=team)


def _set(data: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    head, rest = path[0], path[1:]
    found = data.get(head)
    inner: dict[str, Any] = found if isinstance(found, dict) else {}
    return {**data, head: _set(inner, rest, value) if rest else value}


__all__ = ["ClusterView", "cluster_names", "resolve"]
