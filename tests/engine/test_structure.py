"""The engine stays readable in one sitting: the controller's bar (``tests/controller/test_structure.py``).

A module of ``fleet/engine`` has fewer than ``MAX_LINES`` lines and a class there at most
``MAX_FIELDS`` fields, except where ``LONG_MODULES`` or ``WIDE_CLASSES`` names it with the reason.
The exemptions are a list to shrink: one that is no longer needed fails the test, so the list
says what is true today. Pure: the source is parsed, nothing is imported.
"""

from __future__ import annotations

from tests.controller.test_structure import MAX_FIELDS, MAX_LINES, classes, fields
from tests.paths import ROOT

PACKAGE = ROOT / "fleet" / "engine"

LONG_MODULES = {
    "fleet/engine/disruptions.py": "the pure classing rules of every kind (classes, templates, nodes, slices), "
    "one table of what disrupts GPU work; its reads (``Reads``) are the only I/O",
    "fleet/engine/ledgers.py": "the ledger's storage format (sharded ConfigMaps, the index, progress) and its "
    "migrations, one format read and written in one place",
    "fleet/engine/pipelines.py": "checkout → validate → plan shared by the CLI and the controller, with the "
    "plan cache's keys",
    "fleet/engine/renders.py": "the one mapping of the repository's kinds to applied objects (docs/engine.md's "
    "table), pure",
}
"""Modules over ``MAX_LINES``, and why each is still one concern."""

WIDE_CLASSES = {
    "fleet/engine/changesets.py Change": "the immutable entry every consumer reads (diff, status, metrics, the "
    "PR comment, -o json): one flat value of the proposal, its decision and its result, whose field names are "
    "the JSON's",
}
"""Classes over ``MAX_FIELDS``, and why."""


def test_every_engine_module_is_under_400_lines_or_named_with_its_reason() -> None:
    long = {
        str(p.relative_to(ROOT)) for p in sorted(PACKAGE.rglob("*.py")) if len(p.read_text().splitlines()) >= MAX_LINES
    }
    assert long == set(LONG_MODULES), "split by concern, not by size; an exemption no longer needed goes"


def test_no_engine_class_has_more_than_15_fields_unless_named_with_its_reason() -> None:
    wide = {
        f"{p.relative_to(ROOT)} {cls.name}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for cls in classes(p)
        if len(fields(cls)) > MAX_FIELDS
    }
    assert wide == set(WIDE_CLASSES), "group state into a small dataclass per concern"


def test_the_sync_holds_at_most_15_fields_and_no_callback_into_itself() -> None:
    """``Sync`` keeps its state in one dataclass per concern (``syncstate``); executors are given a
    ``Meter``'s method and a ``Kinds``, never one of the Sync's, so no cycle outlives a run."""
    applies = PACKAGE / "applies.py"
    (sync,) = [c for c in classes(applies) if c.name == "Sync"]
    assert len(fields(sync)) <= MAX_FIELDS
    text = applies.read_text()
    for callback in ("sent=self.", "namespaced=self.", "hold=self.", "record=self."):
        assert callback not in text, callback


def test_the_package_docstring_names_every_module() -> None:
    """``fleet/engine/__init__.py`` is the engine's map: every module and subpackage is on it."""
    text = (PACKAGE / "__init__.py").read_text()
    names = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert {n for n in names if f"``{n}``" not in text} == set()
