"""The controller stays readable in one sitting: small modules, small classes (issue #36).

A module of ``fleet/controller`` has fewer than ``MAX_LINES`` lines, and a class there holds at
most ``MAX_FIELDS`` fields: the annotated fields of its body (a dataclass's) and the attributes its
methods set on ``self``. A class that outgrows that holds more than one concern: split the state
into a small dataclass per concern, as ``controllers.Controller`` does. Pure: the source is parsed,
nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import ROOT

PACKAGE = ROOT / "fleet" / "controller"
MAX_LINES = 400
MAX_FIELDS = 15
FLAG_TABLES = {"settings.py": "Settings"}
"""Classes exempt from ``MAX_FIELDS``: ``settings.Settings`` is the flag table, one field per flag and
``FLEET_*`` variable, whose flat names are what an operator writes; grouping its fields would rename
the variables (pydantic-settings nests them as ``FLEET_GROUP__NAME``)."""


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def fields(cls: ast.ClassDef) -> set[str]:
    """Annotated names in the class body (dataclass fields, ``ClassVar`` aside) and ``self.x`` set in its methods
    (``self.x.y = ...`` sets a field of ``x``'s, not of this class)."""
    names: set[str] = set()
    for node in cls.body:
        annotated = isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        if annotated and "ClassVar" not in ast.unparse(node.annotation):
            names.add(node.target.id)
    for method in cls.body:
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(method):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            while targets:
                target = targets.pop()
                if isinstance(target, ast.Tuple | ast.List):
                    targets.extend(target.elts)
                elif isinstance(target, ast.Starred):
                    targets.append(target.value)
                elif isinstance(target, ast.Attribute) and ast.unparse(target.value) == "self":
                    names.add(target.attr)
    return names


def classes(path: Path) -> list[ast.ClassDef]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]


def test_the_package_is_found() -> None:
    assert len(modules()) > 10, PACKAGE


def test_every_controller_module_is_under_400_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in modules() if (n := len(p.read_text().splitlines())) >= MAX_LINES}
    assert not long, f"split by concern, not by size: {long}"


def test_no_controller_class_has_more_than_15_fields() -> None:
    big = {
        f"{p.relative_to(ROOT)}:{cls.lineno} {cls.name}": len(found)
        for p in modules()
        for cls in classes(p)
        if FLAG_TABLES.get(p.name) != cls.name and len(found := fields(cls)) > MAX_FIELDS
    }
    assert not big, f"group state into a small dataclass per concern: {big}"


def test_fields_counts_dataclass_fields_and_attributes_set_on_self() -> None:
    source = """
class A:
    x: int
    y: int = 0
    z: ClassVar[int] = 1

    def __init__(self) -> None:
        self.w = 1
        self.x = 2
        self.v: int = 3
        other.u = 4

    async def later(self) -> None:
        self.w += 1
        self.t, self.s = 1, 2
        self.w.inner = 5
        self.v.deeper.still = 6
"""
    cls = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef))
    assert fields(cls) == {"x", "y", "w", "v", "t", "s"}
