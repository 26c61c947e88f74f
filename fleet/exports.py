"""Package exports imported on first use (PEP 562).

A package ``__init__`` that imports every submodule makes importing any one of them pay for
all of them: importing ``fleet.manifests.trees`` loaded every pydantic model (~110 ms), and
``fleet.cel.quantities`` the CEL runtime (cel_expr_python and protobuf, ~25 ms), which a
command taking a stored plan never uses. ``lazy`` gives such a package a module
``__getattr__`` that imports a name's submodule when the name is first read and keeps the
value in the package, so ``from fleet.manifests import kinds`` and ``cel.compile_selector``
work as before. The package's ``__all__`` stays its public surface, and type checkers read
the ``TYPE_CHECKING`` imports beside the table.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``; ``homes`` maps a submodule to its names, space-separated."""
    table = {name: module for module, names in homes.items() for name in names.split()}
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        home = table.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    return __getattr__


__all__ = ["lazy"]
