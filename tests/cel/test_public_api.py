"""fleet.cel and fleet.inventory export exactly what other layers are meant to use."""

from __future__ import annotations

import subprocess
import sys

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
        "capacities",
        "holdings",
        "leftovers",
        "limits",
        "models",
        "snapshots",
    ]


def test_exports_are_imported_on_first_use_and_kept() -> None:
    """``fleet.exports.lazy``: a name's submodule is imported when the name is read; an unknown
    name is an AttributeError (so ``hasattr`` and ``from ... import`` behave as for any module)."""
    probe = (
        "import sys; import fleet.cel, fleet.manifests; "
        "before = [m in sys.modules for m in ('fleet.cel.selectors', 'fleet.manifests.kinds')]; "
        "fleet.cel.compile_selector; from fleet.manifests import Manifest; "
        "after = [m in sys.modules for m in ('fleet.cel.selectors', 'fleet.manifests.kinds')]; "
        "kept = 'compile_selector' in vars(fleet.cel) and 'Manifest' in vars(fleet.manifests); "
        "print(before, after, kept, hasattr(fleet.cel, 'nothing'), hasattr(fleet.manifests, 'nothing'))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split("] ", 1)[0] + "]" == "[False, False]"
    assert out.strip().endswith("[True, True] True False False")
