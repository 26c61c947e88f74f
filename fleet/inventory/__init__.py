"""What a cluster's devices can satisfy: inventory from ResourceSlices, claim satisfiability.

``Inventory.from_slices(slices)`` reads ResourceSlices (plain dicts as the API
returns them); ``Checker(inventory=..., classes=...).check_claim(spec)`` /
``check_template(obj)`` say on how many nodes and with how many devices a claim
can be allocated, and return findings as plain data. ``snapshots`` saves and
loads an inventory for ``fleetctl validate --inventory``. Pure: no I/O.
"""

from __future__ import annotations

from fleet.inventory import holdings, models, snapshots
from fleet.inventory.claims import AlternativeReport, Checker, ClaimReport
from fleet.inventory.findings import Finding
from fleet.inventory.inventories import ALL_NODES, Inventory, InventoryDevice, InventoryError

__all__ = [
    "ALL_NODES",
    "AlternativeReport",
    "Checker",
    "ClaimReport",
    "Finding",
    "Inventory",
    "InventoryDevice",
    "InventoryError",
    "holdings",
    "models",
    "snapshots",
]
