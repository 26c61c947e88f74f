"""The fleet repository model: load a checkout into a Revision, resolve it per cluster.

Pure: no network, no clock, no adapters; :mod:`fleet.manifests.trees` is the
only module that touches the file system (reading a checkout), everything
else works on bytes and plain data. The pipeline::

    files = {"teams/ml/single-gpu.yaml": b"...", ...}        # path → bytes
    revision = load_revision(files)                           # or read_revision(Path("."))
    revision.findings      # what could not be loaded (file:line:col, rule, hint)
    revision.manifests     # every object: Manifest(file, kind, name, namespace,
                           #   data, positions, model)
    view = resolve(revision, cluster="gpu-east")              # after that cluster's overlays
    view.fleet, view.cluster, view.operator, view.pools, view.teams,
    view.device_classes, view.claims, view.findings          # overlay problems

API for the engine / ``fleetctl render``:

- ``Manifest.model`` is the validated pydantic object (``kinds.Team``,
  ``resources.ResourceClaimTemplate``...), ``Manifest.data`` the plain mapping
  as written (after overlays) — send ``data`` to the API server, it is exactly
  what the user wrote. ``Manifest.positions.at(path)`` locates any field;
  ``Manifest.location`` the document; ``Manifest.team`` the ``teams/<team>/``
  folder it came from.
- ``resolve`` raises ``FleetError`` for an unknown cluster. ``cluster_names``
  lists the clusters.
- Errors are :class:`Finding` values, never exceptions, so a revision is
  reported whole. ``fleet.policy.check`` adds the policy findings
  (``fleet.policy.validate`` also satisfiability against an inventory).
- ``load_revision(files, cache=ParseCache())`` parses a file only when its
  content changed since the cache last saw it, and ``read_tree(root,
  cache=TreeCache())`` reads it only when its stat changed (the controller keeps both).
- Parsing uses libyaml's composer (fast) with YAML 1.2 scalar resolution done
  here; every refusal (alias bomb, size cap, symlink out, ``..``, non-UTF-8,
  duplicate key, YAML 1.1 ambiguity) is a finding: see :mod:`.yamls`,
  :mod:`.trees`, :class:`Limits`.

Repository layout and kinds: ``docs/repo-format.md``; JSON Schemas: ``schemas/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet import exports

if TYPE_CHECKING:
    from fleet.manifests import kinds, resources
    from fleet.manifests.bases import ClusterSelector, Model, ObjectMeta
    from fleet.manifests.caches import ParseCache, TreeCache
    from fleet.manifests.findings import Finding, Severity, has_errors
    from fleet.manifests.limits import Limits
    from fleet.manifests.locations import Location, Path, Positions, Scalar
    from fleet.manifests.patches import merge
    from fleet.manifests.registry import CLUSTER_SCOPED, FLEET_KINDS, MODELS, RESOURCE_KINDS, group_of
    from fleet.manifests.revisions import Manifest, Revision, load_revision
    from fleet.manifests.trees import read_revision, read_tree
    from fleet.manifests.views import ClusterView, cluster_names, resolve

# Each name's module, imported when the name is first used (PEP 562), so that importing one
# module of the package (``trees``, ``findings``) does not load the pydantic models of every
# kind: a process that takes a stored plan (``fleet.engine.plancaches``) never needs them.
__getattr__ = exports.lazy(
    __name__,
    {
        "bases": "ClusterSelector Model ObjectMeta",
        "caches": "ParseCache TreeCache",
        "findings": "Finding Severity has_errors",
        "limits": "Limits",
        "locations": "Location Path Positions Scalar",
        "patches": "merge",
        "registry": "CLUSTER_SCOPED FLEET_KINDS MODELS RESOURCE_KINDS group_of",
        "revisions": "Manifest Revision load_revision",
        "trees": "read_revision read_tree",
        "views": "ClusterView cluster_names resolve",
    },
)

__all__ = [
    "CLUSTER_SCOPED",
    "FLEET_KINDS",
    "MODELS",
    "RESOURCE_KINDS",
    "ClusterSelector",
    "ClusterView",
    "Finding",
    "Limits",
    "Location",
    "Manifest",
    "Model",
    "ObjectMeta",
    "ParseCache",
    "Path",
    "Positions",
    "Revision",
    "Scalar",
    "Severity",
    "TreeCache",
    "cluster_names",
    "group_of",
    "has_errors",
    "kinds",
    "load_revision",
    "merge",
    "read_revision",
    "read_tree",
    "resolve",
    "resources",
]
