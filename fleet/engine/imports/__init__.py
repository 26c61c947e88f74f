"""``fleetctl import``: a cluster set up by hand, turned into a fleet repository that diffs to zero.

- ``lives``         what is read from the cluster (one list per kind, helm's release record, gates)
- ``documents``     a repository's documents, what could not be mapped, live objects cleaned for people
- ``mappings``      pure: the live objects → the repository (fleet.yaml, Cluster, GPUOperator, classes),
                    and the origin the ledger records for each object taken over
- ``pools``         pure: GPU nodes grouped into GPUNodePools by their labels and taints
- ``teams``         pure: namespaces holding claim templates as Teams, their owners and quotas
- ``maintenances``  pure: DeviceTaintRules as GPUMaintenances, whole or as a row saying why not
- ``selections``    pure: what a rule takes, named as the engine's own expansion reads it back
- ``tolerations``   pure: whether a rule's taint may become fleet's (no claim tells the two apart)
- ``repositories``  the files (ruamel.yaml, commented), validated in a staging copy before any is written
- ``takeovers``     the import's one write to the cluster: an apply of the new repository that adopts
"""

from __future__ import annotations

from fleet.engine.imports.lives import HelmRelease, Live, read, require_dra
from fleet.engine.imports.mappings import Document, Imported, Unmapped, imported
from fleet.engine.imports.takeovers import take_over

__all__ = [
    "Document",
    "HelmRelease",
    "Imported",
    "Live",
    "Unmapped",
    "imported",
    "read",
    "require_dra",
    "take_over",
]
