"""Rules about where objects are written and how they are named (the revision as a whole).

These hold for the files as written, whatever the overlays: a team folder
holds its Team and its claims only, DeviceClasses live in ``deviceclasses/``,
GPUMaintenances in ``maintenance/`` or in a Cluster's ``clusters/<cluster>/maintenance/``
(for that cluster alone: ``maintenance-location``), no object is declared twice,
names are DNS labels, and the Fleet names exactly the Clusters that exist. The
adopt and take-ownership annotations, when present, say ``"true"``, and the drift
annotation names a drift policy: any other value would silently do nothing
(``adopt-annotation``, ``take-ownership-annotation``, ``drift-annotation``). A Team
with ``owners: []`` is a warning (``team-owners``): it grants nobody its claims.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePosixPath

from fleet.manifests import CLUSTER_SCOPED, Finding, Location, Manifest, Revision, kinds, maintenances
from fleet.policy import walks

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CLAIMS = ("ResourceClaimTemplate", "ResourceClaim")


def check(revision: Revision) -> Iterator[Finding]:
    yield from duplicates(revision)
    teams = {m.team for m in revision.manifests if m.kind == "Team" and m.model is not None}
    for manifest in revision.manifests:
        yield from _own(manifest, has_team=manifest.team in teams)
    yield from fleet_root(revision)


_OWN_KEYS = {has_team: f"structures\0{has_team}" for has_team in (True, False)}


def _own(manifest: Manifest, *, has_team: bool) -> tuple[Finding, ...]:
    """The findings about ``manifest`` alone (names, placement, adoption), computed once per
    manifest: an unchanged file keeps its manifests in the controller's ParseCache, so a
    commit re-checks only the files it changed. ``has_team``: its folder holds a Team."""
    key = _OWN_KEYS[has_team]  # one string each, not one per manifest's memo
    found: tuple[Finding, ...] | None = manifest.memo.get(key)
    if found is None:
        teams = {manifest.team} if has_team else set()
        found = manifest.memo[key] = (
            *names(manifest),
            *placement(manifest, teams=teams),
            *adoption(manifest),
            *owners(manifest),
        )
    return found


def owners(manifest: Manifest) -> Iterator[Finding]:
    """A Team with ``owners: []`` is valid (``fleetctl import`` writes it when it finds no owners, rather
    than granting a guessed group) but grants nobody the team's claims: a warning until someone is named."""
    if isinstance(manifest.model, kinds.Team) and not manifest.model.spec.owners:
        yield Finding(
            manifest.positions.at(("spec", "owners")),
            "team-owners",
            f"Team {manifest.name!r} has no owners: nobody but fleet may make claims in its namespaces",
            severity="warning",
            hint="name who claims there in spec.owners (kind: Group|User|ServiceAccount, name) and apply",
            object=manifest.ref,
        )


ADOPT = "fleet.gpufleet.dev/adopt"
"""``fleet.engine.ownership.ADOPT`` (the engine sits above policy)."""
TAKE_OWNERSHIP = "fleet.gpufleet.dev/take-ownership"
"""``fleet.engine.ownership.TAKE_OWNERSHIP``."""
DRIFT = "fleet.gpufleet.dev/drift"
"""``fleet.engine.ownership.DRIFT``."""
DRIFT_POLICIES = ("enforce", "report", "ignore")


def adoption(manifest: Manifest) -> Iterator[Finding]:
    """fleet's instruction annotations carry a value fleet understands: another value would
    silently not adopt, not take ownership, or not freeze (each is stripped, never applied)."""
    metadata = manifest.data.get("metadata") if isinstance(manifest.data, dict) else None
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, dict):
        return
    if ADOPT in annotations and annotations[ADOPT] != "true":
        yield Finding(
            manifest.positions.at(("metadata", "annotations", ADOPT)),
            "adopt-annotation",
            f'{ADOPT} is {annotations[ADOPT]!r}; only "true" adopts an existing object',
            hint=f'write {ADOPT}: "true" to let fleet take the object over if it exists, or remove it',
            object=manifest.ref,
        )
    if TAKE_OWNERSHIP in annotations and annotations[TAKE_OWNERSHIP] != "true":
        yield Finding(
            manifest.positions.at(("metadata", "annotations", TAKE_OWNERSHIP)),
            "take-ownership-annotation",
            f'{TAKE_OWNERSHIP} is {annotations[TAKE_OWNERSHIP]!r}; only "true" takes fields other managers own',
            hint=f'write {TAKE_OWNERSHIP}: "true" to apply this object with force, or remove it',
            object=manifest.ref,
        )
    if DRIFT in annotations and annotations[DRIFT] not in DRIFT_POLICIES:
        yield Finding(
            manifest.positions.at(("metadata", "annotations", DRIFT)),
            "drift-annotation",
            f"{DRIFT} is {annotations[DRIFT]!r}; the drift policies are {', '.join(DRIFT_POLICIES)}",
            hint=f"write {DRIFT}: report (repairs nothing, reports drift) or ignore, or remove it (enforce)",
            object=manifest.ref,
        )


def duplicates(revision: Revision) -> Iterator[Finding]:
    first: dict[tuple[str, str, str, str], Manifest] = {}
    for manifest in revision.manifests:
        seen = first.setdefault(manifest.identity, manifest)
        if seen is not manifest:
            yield Finding(
                manifest.location,
                "duplicate-object",
                f"{manifest.ref} is already defined at {seen.location}",
                hint="keep one definition; use an overlay to vary it per cluster",
                object=manifest.ref,
            )


def names(manifest: Manifest) -> Iterator[Finding]:
    if manifest.kind == "DeviceClass":
        if not _DNS_SUBDOMAIN.match(manifest.name):
            yield _bad_name(manifest, ("metadata", "name"), manifest.name, subdomain=True)
    elif not _DNS_LABEL.match(manifest.name):
        yield _bad_name(manifest, ("metadata", "name"), manifest.name, subdomain=False)
    if manifest.namespace is not None and not _DNS_LABEL.match(manifest.namespace):
        yield _bad_name(manifest, ("metadata", "namespace"), manifest.namespace, subdomain=False)
    if isinstance(manifest.model, kinds.Team):
        for index, namespace in enumerate(manifest.model.spec.namespaces):
            if not _DNS_LABEL.match(namespace):
                yield _bad_name(manifest, ("spec", "namespaces", index), namespace, subdomain=False)
    for request in walks.requests(manifest):
        if not _DNS_LABEL.match(request.name.rpartition("/")[2]):
            yield _bad_name(
                manifest,
                request.path[:-1] if request.path[-1] == "exactly" else request.path,
                request.name,
                subdomain=False,
            )


def _bad_name(manifest: Manifest, path: tuple[str | int, ...], value: str, *, subdomain: bool) -> Finding:
    what = "DNS subdomain (RFC 1123)" if subdomain else "DNS label (RFC 1123)"
    return Finding(
        manifest.positions.at(path),
        "dns-label",
        f"{value!r} is not a valid {what}",
        hint="use lower-case letters, digits and '-', starting and ending with a letter or digit"
        + ("" if subdomain else ", at most 63 characters"),
        object=manifest.ref,
    )


def placement(manifest: Manifest, *, teams: set[str | None]) -> Iterator[Finding]:
    """Where ``manifest`` is written; ``teams`` are the folders that hold a Team."""
    parts = PurePosixPath(manifest.file).parts
    where, ref = manifest.location, manifest.ref
    team = manifest.team
    if team is not None:
        if manifest.kind == "Team":
            if parts[2:] != ("team.yaml",) or manifest.name != team:
                yield Finding(
                    where,
                    "team-folder",
                    f"Team {manifest.name!r} must be teams/{manifest.name}/team.yaml",
                    hint=f"name it {team!r} or move it to teams/{manifest.name}/team.yaml",
                    object=ref,
                )
        elif manifest.kind in CLUSTER_SCOPED:
            yield Finding(
                where,
                "team-cluster-scoped",
                f"{manifest.kind} is cluster-scoped and cannot be in a team folder",
                hint="team folders hold ResourceClaimTemplates and ResourceClaims only; "
                "the platform team owns cluster-scoped objects"
                + (" (DeviceClasses go in deviceclasses/)" if manifest.kind == "DeviceClass" else ""),
                object=ref,
            )
        elif manifest.kind not in _CLAIMS:
            yield Finding(
                where,
                "team-kind",
                f"{manifest.kind} is not allowed in a team folder",
                hint="team folders hold ResourceClaimTemplates and ResourceClaims only"
                + (
                    f"; the platform team takes devices out: {_MAINTENANCE_FOLDERS}"
                    if manifest.kind == "GPUMaintenance"
                    else ""
                ),
                object=ref,
            )
        elif team not in teams:
            yield Finding(
                where,
                "team-folder",
                f"teams/{team}/ has no team.yaml declaring Team {team!r}",
                hint=f"add teams/{team}/team.yaml (namespaces, owners, device classes)",
                object=ref,
            )
        return
    if manifest.kind == "DeviceClass" and parts[0] != "deviceclasses":
        yield Finding(
            where,
            "deviceclass-location",
            "DeviceClasses must be in deviceclasses/",
            hint=f"move it to deviceclasses/{manifest.name}.yaml",
            object=ref,
        )
    elif manifest.kind in _CLAIMS:
        yield Finding(
            where,
            "claim-location",
            f"{manifest.kind} outside a team folder has no owner",
            hint="move it to teams/<team>/",
            object=ref,
        )
    elif manifest.kind == "Team":
        yield Finding(
            where,
            "team-folder",
            f"Team {manifest.name!r} must be teams/{manifest.name}/team.yaml",
            hint=f"move it to teams/{manifest.name}/team.yaml",
            object=ref,
        )
    elif manifest.kind == "GPUMaintenance" and maintenance_folder(manifest.file) is None:
        yield Finding(
            where,
            "maintenance-location",
            f"GPUMaintenance {manifest.name!r} outside maintenance/ and clusters/<cluster>/maintenance/",
            hint=_MAINTENANCE_FOLDERS,
            object=ref,
        )
    elif manifest.model is None:
        yield Finding(
            where,
            "unsupported-kind",
            f"fleet does not manage {manifest.api_version} {manifest.kind}",
            hint="a fleet repository holds the fleet kinds, DeviceClasses and teams' claims; "
            "deploy workloads with your usual tooling",
            object=ref,
        )


_MAINTENANCE_FOLDERS = (
    "move it to maintenance/ (spec.clusters says which clusters) or clusters/<cluster>/maintenance/ (that cluster)"
)


def maintenance_folder(file: str) -> str | None:
    """Where a GPUMaintenance may be: ``maintenance/…`` → "" (the fleet's), ``clusters/<cluster>/maintenance/…``
    → ``<cluster>``; None elsewhere."""
    parts = PurePosixPath(file).parts
    if len(parts) > 1 and parts[0] == "maintenance":
        return ""
    if len(parts) > 3 and parts[0] == "clusters" and parts[2] == "maintenance":
        return parts[1]
    return None


def fleet_root(revision: Revision) -> Iterator[Finding]:
    fleets = revision.of_kind("Fleet")
    clusters = {m.name: m for m in revision.of_kind("Cluster")}
    if not fleets:
        if not any(f.location.file == "fleet.yaml" for f in revision.findings):
            yield Finding(
                Location("fleet.yaml"),
                "fleet-root",
                "the repository has no Fleet (fleet.yaml)",
                hint="is this the root of a fleet repository? Add fleet.yaml (kind: Fleet) listing the clusters",
            )
        return
    for extra in fleets[1:]:
        yield Finding(
            extra.location,
            "fleet-root",
            f"a second Fleet (first at {fleets[0].location})",
            hint="a repository has one fleet.yaml",
            object=extra.ref,
        )
    fleet = fleets[0]
    assert isinstance(fleet.model, kinds.Fleet)
    listed = fleet.model.spec.clusters
    # clusters/<name>.yaml that failed to load: already findings, so no cascade of reference errors
    broken = {
        f.location.file.removeprefix("clusters/").rsplit(".", 1)[0]
        for f in revision.findings
        if f.severity == "error" and f.location.file.startswith("clusters/")
    }
    for index, name in enumerate(listed):
        if name not in clusters and name not in broken:
            yield Finding(
                fleet.positions.at(("spec", "clusters", index)),
                "cluster-reference",
                f"Fleet lists cluster {name!r} but no valid Cluster {name!r} was loaded (clusters/{name}.yaml)",
                hint=_known(clusters),
                object=fleet.ref,
            )
    for name, cluster in sorted(clusters.items()):
        if name not in listed:
            yield Finding(
                cluster.location,
                "cluster-reference",
                f"Cluster {name!r} is not listed in the Fleet",
                hint=f"add {name!r} to spec.clusters of {fleet.file}",
                object=cluster.ref,
            )
    if fleet.model.spec.rollout is not None:
        yield from _waves(fleet, fleet.model.spec.rollout, listed=set(listed))
    labels = {n: c.model.metadata.labels for n, c in clusters.items() if isinstance(c.model, kinds.Cluster)}
    for manifest in revision.manifests:
        yield from _selectors(manifest, clusters=labels, broken=broken)


def _waves(fleet: Manifest, rollout: kinds.Rollout, *, listed: set[str]) -> Iterator[Finding]:
    """Every wave names clusters of this fleet, each cluster in one wave at most."""
    first: dict[str, int] = {}
    for wave, names in enumerate(rollout.waves):
        for index, name in enumerate(names):
            where = fleet.positions.at(("spec", "rollout", "waves", wave, index))
            if name not in listed:
                yield Finding(
                    where,
                    "rollout-waves",
                    f"wave {wave + 1} names cluster {name!r}, which the Fleet does not list",
                    hint=f"use one of spec.clusters: {', '.join(sorted(listed)) or 'none'}",
                    object=fleet.ref,
                )
            elif name in first:
                yield Finding(
                    where,
                    "rollout-waves",
                    f"cluster {name!r} is in wave {first[name] + 1} and again in wave {wave + 1}",
                    hint="put each cluster in one wave only",
                    object=fleet.ref,
                )
            else:
                first[name] = wave


def _selectors(manifest: Manifest, *, clusters: dict[str, dict[str, str]], broken: set[str]) -> Iterator[Finding]:
    """Selector names must exist; a selector that matches no cluster is a warning. A GPUMaintenance in
    ``clusters/<cluster>/maintenance/`` is for that cluster alone: its folder names a Cluster, and its
    ``spec.clusters``, if any, selects that cluster."""
    model = manifest.model
    if not isinstance(model, kinds.Team | kinds.GPUNodePool | kinds.Overlay | maintenances.GPUMaintenance):
        return
    folder = maintenance_folder(manifest.file) if isinstance(model, maintenances.GPUMaintenance) else None
    if folder and folder not in clusters:
        if folder not in broken:
            yield Finding(
                manifest.location,
                "maintenance-location",
                f"clusters/{folder}/maintenance/ is the folder of cluster {folder!r}, but there is no such Cluster",
                hint=f"{_known(set(clusters))}; {_MAINTENANCE_FOLDERS}",
                object=manifest.ref,
            )
        return
    selector = model.spec.clusters
    unknown = False
    for index, name in enumerate(selector.names):
        if name not in clusters and name not in broken:
            unknown = True
            yield Finding(
                manifest.positions.at(("spec", "clusters", "names", index)),
                "cluster-reference",
                f"no Cluster named {name!r}",
                hint=_known(set(clusters)),
                object=manifest.ref,
            )
    if unknown:
        return
    if folder:
        if not selector.matches(name=folder, labels=clusters[folder]):
            other = [n for n in selector.names if n != folder]
            yield Finding(
                manifest.positions.at(
                    ("spec", "clusters", "names", selector.names.index(other[0])) if other else ("spec", "clusters")
                ),
                "maintenance-location",
                f"a file in clusters/{folder}/maintenance/ is for cluster {folder!r} alone, but its spec.clusters "
                + (f"names {', '.join(repr(n) for n in other)}" if other else f"does not select {folder!r}"),
                hint="remove spec.clusters, or move the file to maintenance/ to name the clusters there",
                object=manifest.ref,
            )
        return
    if not broken and not any(selector.matches(name=n, labels=ls) for n, ls in clusters.items()):
        yield Finding(
            manifest.positions.at(("spec", "clusters")),
            "cluster-reference",
            f"{manifest.kind} {manifest.name!r} selects no cluster, so it is never applied",
            severity="warning",
            hint="check spec.clusters against the clusters' names and metadata.labels",
            object=manifest.ref,
        )


def _known(clusters: dict[str, Manifest] | set[str]) -> str:
    return f"known clusters: {', '.join(sorted(clusters)) or 'none'}"


__all__ = ["check", "duplicates", "fleet_root", "maintenance_folder", "names", "placement"]
