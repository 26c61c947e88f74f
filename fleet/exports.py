"""Package exports imported on first use (PEP 562).

A package ``__init__`` that imports every submodule makes importing any one of them pay for
all of them: importing ``fleet.manifests.trees`` loaded every pydantic model, and
``fleet.cel.quantities`` the CEL runtime (cel_expr_python and protobuf), which a
command taking a stored plan never uses. ``lazy`` gives such a package a module
``__getattr__`` that imports a name's submodule when the name is first read and keeps the
value in the package, so ``from fleet.manifests import kinds`` and ``cel.compile_selector``
work as before. The package's ``__all__`` stays its public surface, and type checkers read
the ``TYPE_CHECKING`` imports beside the table.

``defer`` does the same for another library's dependencies: kr8s imports httpx-ws (for exec and
port-forward), python-jsonpath (for ``kubeconfig get``-style queries) and cryptography's x509 (for
``whoami``) at its top, a part of every command's start, and fleet calls none of them. A deferred
module is a stand-in in ``sys.modules`` that imports the real one when an attribute of it is
first read, so a library that binds it with ``import x`` works unchanged.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
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


class _Deferred(types.ModuleType):
    """A module not imported yet. It has the attributes a module's spec gives (so ``import x``
    finds it loaded); any other attribute imports the real module, whose names are then copied
    in, so every holder of the stand-in sees the real module."""

    def __getattr__(self, name: str) -> Any:
        with _loading:  # two threads reading first at once: one imports, the other waits
            own = vars(self)
            real = own.get("__deferred_real__")
            if real is None:
                module_name = own["__name__"]
                if sys.modules.get(module_name) is self:
                    del sys.modules[module_name]
                try:
                    real = importlib.import_module(module_name)
                except BaseException:
                    sys.modules.setdefault(module_name, self)
                    raise
                own.update(vars(real))
                own["__deferred_real__"] = real
        return getattr(real, name)


_loading = threading.RLock()


def defer(*names: str) -> None:
    """Let ``import name`` succeed without running the module until one of its attributes is read.

    A module already imported, or not installed, is left alone (importing it later then fails
    as it would have). Only for modules that are bound with ``import name`` and used inside
    functions: ``from name import x`` reads the attribute, which imports the module at once.
    """
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        stand_in = _Deferred(name)
        # What the import system and ``inspect.getmodule`` (which pydantic calls for every model
        # class, over all of sys.modules) read of a module: answered without importing it.
        stand_in.__spec__, stand_in.__loader__, stand_in.__package__ = spec, spec.loader, spec.parent
        if spec.has_location:
            stand_in.__file__ = spec.origin
        sys.modules[name] = stand_in


__all__ = ["defer", "lazy"]
