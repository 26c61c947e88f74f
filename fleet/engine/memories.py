"""What a process that reconciles again and again keeps between runs, and how big each part is.

The controller runs the engine on every commit, drift event and resync for months. What
it remembers between runs makes a no-op cheap: the no-dry-run answers (``diffs.Settled``)
the operator release last seen deployed (``operators.Noops``) and the device inventories the
GPUMaintenances were expanded over (``maintenances.Inventories``). All are bounded by
construction, and the one driver (``fleet.engine.drives``) sweeps ``Settled`` after
every run, whoever runs it. ``sizes`` is what ``fleet_cache_entries`` exports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.engine import diffs, maintenances, operators


@dataclass
class Memory:
    settled: diffs.Settled = field(default_factory=diffs.Settled)
    operator_noops: operators.Noops = field(default_factory=operators.Noops)
    inventories: maintenances.Inventories = field(default_factory=maintenances.Inventories)

    def sizes(self) -> dict[str, int]:
        """Entries per cache, by the name ``fleet_cache_entries{cache=…}`` gives it."""
        return {
            "settled": len(self.settled),
            "operator_releases": len(self.operator_noops.deployed),
            "helm_indexes": len(self.operator_noops.indexes.indexes),
            "maintenance_inventories": len(self.inventories.kept),
        }


__all__ = ["Memory"]
