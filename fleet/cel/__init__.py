"""CEL for DRA device selectors, with Kubernetes' DRA environment and error behaviour.

``compile_selector(expression)`` type-checks a selector as the API server does
(positions on every problem); ``Selector.evaluate(device)`` evaluates it as the
scheduler does (unknown attribute = error, unknown domain = empty map, result
must be bool). ``Device.from_slice`` builds the ``device`` variable from a
ResourceSlice device. Pure: no I/O. See docs/cel.md for the runtime choice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet import exports

if TYPE_CHECKING:
    from fleet.cel.devices import Device, DeviceError, parse_qualified_name, projection
    from fleet.cel.quantities import Quantity, QuantityError, parse_quantity
    from fleet.cel.references import Clause, NameUse, References, find_references, split_clauses
    from fleet.cel.selectors import (
        MAX_EXPRESSION_LENGTH,
        Issue,
        Selector,
        SelectorCompileError,
        SelectorRuntimeError,
        compile_selector,
        position,
        standard_misuses,
    )
    from fleet.cel.semvers import Semver, SemverError, normalize_and_parse, parse_semver

# Each name's module, imported when the name is first used (PEP 562): the CEL runtime
# (cel_expr_python and protobuf) is loaded only by a process that compiles or
# evaluates an expression, not by every command that imports fleet.cel for quantities.
__getattr__ = exports.lazy(
    __name__,
    {
        "devices": "Device DeviceError parse_qualified_name projection",
        "quantities": "Quantity QuantityError parse_quantity",
        "references": "Clause NameUse References find_references split_clauses",
        "selectors": "MAX_EXPRESSION_LENGTH Issue Selector SelectorCompileError SelectorRuntimeError "
        "compile_selector position standard_misuses",
        "semvers": "Semver SemverError normalize_and_parse parse_semver",
    },
)

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "Clause",
    "Device",
    "DeviceError",
    "Issue",
    "NameUse",
    "Quantity",
    "QuantityError",
    "References",
    "Selector",
    "SelectorCompileError",
    "SelectorRuntimeError",
    "Semver",
    "SemverError",
    "compile_selector",
    "find_references",
    "normalize_and_parse",
    "parse_qualified_name",
    "parse_quantity",
    "parse_semver",
    "position",
    "projection",
    "split_clauses",
    "standard_misuses",
]
