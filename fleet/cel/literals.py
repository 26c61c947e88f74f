"""Homogeneous aggregate literals, checked as cel-go checks them for Kubernetes.

Kubernetes builds its CEL environments with ``cel.HomogeneousAggregateLiterals``:
the elements of a list literal, and the keys and the values of a map literal,
must agree in type, so ``[1, 'a']`` or ``[device.driver, 1]`` do not compile
("expected type 'string' but found 'int'", at the element). cel-cpp has no such
option, so fleet runs cel-go's rule (``checker.joinTypes`` with
``isAssignable`` and ``mostGeneral``, cel-go v0.26.0 ``checker/types.go``) over
cel-cpp's checked AST, which carries the type of every element
(:mod:`fleet.cel.asts`).

Type parameters are the one simplification: cel-cpp's AST holds final types,
where an unbound parameter (the element type of ``[]``) has become ``dyn``, so
``[[], [1], ['a']]`` passes here while cel-go, which binds the parameter to
``int`` on the way, rejects it.
"""

from __future__ import annotations

from typing import Any

from fleet.cel import asts
from fleet.cel.references import Token

_OPERAND_ENDS = frozenset({")", "]", "}"})
_NULLABLE = frozenset({"message_type", "abstract_type", "well_known", "wrapper", "null"})


def has_aggregate_literal(tokens: list[Token]) -> bool:
    """Whether the expression builds a list or map literal (``[`` not indexing, or ``{``)."""
    for index, token in enumerate(tokens):
        if token.text == "{":
            return True
        if token.text == "[":
            before = tokens[index - 1] if index else None
            if before is None or not (before.kind in ("ident", "number", "string") or before.text in _OPERAND_ENDS):
                return True
    return False


def _kind(cel_type: Any) -> str:
    kind = cel_type.WhichOneof("kind")
    if kind == "well_known" and cel_type.well_known == 1:  # google.protobuf.Any is dyn to the checker
        return "dyn"
    return str(kind or "dyn")


def _params(cel_type: Any) -> list[Any]:
    kind = _kind(cel_type)
    if kind == "list_type":
        return [cel_type.list_type.elem_type]
    if kind == "map_type":
        return [cel_type.map_type.key_type, cel_type.map_type.value_type]
    if kind == "abstract_type":
        return list(cel_type.abstract_type.parameter_types)
    if kind == "type":
        return [cel_type.type]
    return []


def _name(cel_type: Any) -> str:
    kind = _kind(cel_type)
    if kind == "abstract_type":
        return str(cel_type.abstract_type.name)
    if kind in ("list_type", "map_type", "type", "dyn", "error", "null"):
        return kind
    return asts.type_name(cel_type)


def assignable(first: Any, second: Any) -> bool:
    """cel-go's ``internalIsAssignable`` with type parameters taken as ``dyn``."""
    one, two = _kind(first), _kind(second)
    if {one, two} & {"dyn", "error", "type_param"}:
        return True
    if one == "null":
        return two in _NULLABLE
    if two == "null":
        return one in _NULLABLE
    if one == "wrapper" or two == "wrapper":
        left = first.wrapper if one == "wrapper" else first.primitive
        right = second.wrapper if two == "wrapper" else second.primitive
        return two in ("wrapper", "primitive") and one in ("wrapper", "primitive") and left == right
    if one == "type":
        return two == "type"
    if one in ("list_type", "map_type", "abstract_type"):
        if one != two or _name(first) != _name(second):
            return False
        left, right = _params(first), _params(second)
        return len(left) == len(right) and all(assignable(a, b) for a, b in zip(left, right, strict=True))
    return one == two and _name(first) == _name(second)


def _less_specific(first: Any, second: Any) -> bool:
    """cel-go's ``isEqualOrLessSpecific``."""
    one, two = _kind(first), _kind(second)
    if one in ("dyn", "type_param"):
        return True
    if two in ("dyn", "type_param") or one != two:
        return False
    if one in ("list_type", "map_type", "abstract_type"):
        left, right = _params(first), _params(second)
        return (
            _name(first) == _name(second)
            and len(left) == len(right)
            and all(_less_specific(a, b) for a, b in zip(left, right, strict=True))
        )
    if one == "type":
        return True
    return _name(first) == _name(second)


class _Join:
    """One literal's element (or key, or value) type as cel-go accumulates it."""

    def __init__(self, types: Any, positions: Any, problems: list[tuple[int, str]]) -> None:
        self.types, self.positions, self.problems = types, positions, problems
        self.current: Any = None
        self.failed = False  # after a mismatch cel-go's join holds the error type

    def add(self, node: Any, *, optional: bool = False) -> None:
        found = self.types.get(node.id)
        if found is None:
            return
        if optional and _kind(found) == "abstract_type" and found.abstract_type.name == "optional_type":
            found = found.abstract_type.parameter_types[0]
        if self.current is None or self.failed:  # the error type accepts the next element and yields to it
            self.current, self.failed = found, False
        elif assignable(self.current, found):
            self.current = self.current if _less_specific(self.current, found) else found
        else:
            message = f"expected type '{asts.type_name(self.current)}' but found '{asts.type_name(found)}'"
            self.problems.append((int(self.positions.get(node.id, 0)), message))
            self.failed = True


def mismatches(checked: Any) -> list[tuple[int, str]]:
    """(offset, message) of every element that breaks its literal's type, in source order."""
    problems: list[tuple[int, str]] = []
    types, positions = checked.type_map, checked.source_info.positions
    for node in asts.walk(checked.expr):
        kind = node.WhichOneof("kind")
        if kind == "list_expr":
            elements = _Join(types, positions, problems)
            optional = set(node.list_expr.optional_indices)
            for index, element in enumerate(node.list_expr.elements):
                elements.add(element, optional=index in optional)
        elif kind == "struct_expr" and not node.struct_expr.message_name:
            keys, values = _Join(types, positions, problems), _Join(types, positions, problems)
            for entry in node.struct_expr.entries:
                keys.add(entry.map_key)
                values.add(entry.value, optional=entry.optional_entry)
    return sorted(problems, key=lambda problem: problem[0])


__all__ = ["assignable", "has_aggregate_literal", "mismatches"]
