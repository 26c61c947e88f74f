"""fleet.cel and fleet.inventory export exactly what other layers are meant to use."""

from __future__ import annotations

import fleet.cel
import fleet.inventory


def public(module: object) -> list[str]:
    return sorted(n for n in vars(module) if not n.startswith("_") and n != "annotations")


def test_cel_exports() -> None:
    """Every exported name resolves (they are imported on first use, see ``fleet.cel.__getattr__``)."""
    assert len(set(fleet.cel.__all__)) == len(fleet.cel.__all__)
    for name in fleet.cel.__all__:
        getattr(fleet.cel, name)
    assert set(fleet.cel.__all__) <= set(public(fleet.cel))
    assert {"compile_selector", "Selector", "SelectorCompileError", "SelectorRuntimeError", "Device", "Issue"} <= set(
        fleet.cel.__all__
    )


def test_inventory_exports() -> None:
    assert fleet.inventory.__all__ == [
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
