"""What a cluster's devices can satisfy: inventory from ResourceSlices, claim satisfiability.

``Inventory.from_slices(slices)`` reads ResourceSlices (plain dicts as the API
returns them); ``Checker(inventory=..., classes=...).check_claim(spec)`` /
``check_template(obj)`` say on how many nodes and with how many devices a claim
can be allocated and how many copies fit at once — counting the counters of
partitionable devices (dynamic MIG) and the capacity of shared devices across
copies — and return findings as plain data. ``holdings.usage`` turns live claims
into the scheduler's allocated state (``Checker(usage=...)``: what fits now),
``leftovers`` says what is left of each device, ``limits`` finds slices the API
or the scheduler would refuse, and ``snapshots`` saves and loads an inventory for
``fleetctl validate --inventory``. Pure: no I/O.
"""

from __future__ import annotations

from fleet.inventory import capacities, holdings, leftovers, limits, models, snapshots
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
    "capacities",
    "holdings",
    "leftovers",
    "limits",
    "models",
    "snapshots",
]
