"""Homogeneous aggregate literals, checked as Kubernetes' cel-go checks them.

Kubernetes builds its CEL environments with ``cel.HomogeneousAggregateLiterals``
(k8s.io/apiserver v0.37.2 ``pkg/cel/environment/base.go``), which in cel-go
v0.26.0 is an AST validator that runs after a successful type check
(``homogeneousAggregateLiteralValidator``, ``cel/validator.go``): in every
list literal, the first element whose type is not *equivalent* to the first
element's (the same type, type parameter names aside; ``dyn`` is no joker) is
an error, "expected type 'int' but found 'string'", at that element; in every
map literal, every key and every value whose type differs from the first
entry's is one. So ``[1, 'a']``, ``[device.driver, 1]`` and even
``[attribute, 1]`` or ``[1, dyn('a')]`` do not compile. cel-cpp has no such
validator; fleet runs this one over cel-cpp's checked AST, which carries the
final type of every element (:mod:`fleet.cel.asts`).

Attribute values are ``any`` in Kubernetes and ``dyn`` here (a protobuf
``Struct`` value): both equal themselves and nothing else, so the verdicts and
positions agree; the message names a field read's ``dyn`` as ``any``.
"""

from __future__ import annotations

from typing import Any

from fleet.cel import asts
from fleet.cel.references import Token

_OPERAND_ENDS = frozenset({")", "]", "}"})
_READS = frozenset({"_[_]", "_[?_]", "_?._"})


def has_aggregate_literal(tokens: list[Token]) -> bool:
    """Whether the expression builds a list or map literal (``[`` not indexing, or ``{``)."""
    for index, token in enumerate(tokens):
        if token.text == "{":
            return True
        if token.text in ("[", "[?"):
            before = tokens[index - 1] if index else None
            if before is None or not (before.kind in ("ident", "number", "string") or before.text in _OPERAND_ENDS):
                return True
    return False


def equivalent(first: Any, second: Any) -> bool:
    """cel-go's ``Type.IsEquivalentType``: the same type, whatever type parameters are called."""
    kind = first.WhichOneof("kind")
    if kind != second.WhichOneof("kind"):
        return False
    if kind == "type_param":
        return True
    if kind == "list_type":
        return equivalent(first.list_type.elem_type, second.list_type.elem_type)
    if kind == "map_type":
        return equivalent(first.map_type.key_type, second.map_type.key_type) and equivalent(
            first.map_type.value_type, second.map_type.value_type
        )
    if kind == "abstract_type":
        left, right = first.abstract_type, second.abstract_type
        return (
            left.name == right.name
            and len(left.parameter_types) == len(right.parameter_types)
            and all(equivalent(a, b) for a, b in zip(left.parameter_types, right.parameter_types, strict=True))
        )
    if kind == "type":
        return equivalent(first.type, second.type)
    return bool(first == second)


def _unwrap_optional(cel_type: Any) -> Any:
    if cel_type.WhichOneof("kind") == "abstract_type" and cel_type.abstract_type.parameter_types:
        return cel_type.abstract_type.parameter_types[0]
    return cel_type


def _named(node: Any, cel_type: Any) -> str:
    """The type as Kubernetes names it: a field read's ``dyn`` is an attribute value, ``any`` there."""
    kind = node.WhichOneof("kind")
    is_read = kind == "select_expr" or (kind == "call_expr" and node.call_expr.function in _READS)
    if cel_type.WhichOneof("kind") == "dyn" and is_read:
        return "any"
    return asts.type_name(cel_type).replace("null_type", "null")


class _Literal:
    """Types seen in one literal; ``mismatch`` reports where one differs from the first."""

    def __init__(self, types: Any, positions: Any, problems: list[tuple[int, str]]) -> None:
        self.types, self.positions, self.problems = types, positions, problems

    def type_of(self, node: Any, *, optional: bool = False) -> Any:
        found = self.types.get(node.id)
        if found is None:
            return None
        return _unwrap_optional(found) if optional else found

    def mismatch(self, first: tuple[Any, Any] | None, node: Any, found: Any) -> bool:
        if first is None or found is None or first[1] is None or equivalent(first[1], found):
            return False
        message = f"expected type '{_named(*first)}' but found '{_named(node, found)}'"
        self.problems.append((int(self.positions.get(node.id, 0)), message))
        return True


def mismatches(checked: Any, nodes: list[Any] | None = None) -> list[tuple[int, str]]:
    """(offset, message) of every element that breaks its literal's type, in source order."""
    problems: list[tuple[int, str]] = []
    literal = _Literal(checked.type_map, checked.source_info.positions, problems)
    for node in nodes if nodes is not None else asts.walk(checked.expr):
        kind = node.WhichOneof("kind")
        if kind == "list_expr":
            optional = set(node.list_expr.optional_indices)
            first: tuple[Any, Any] | None = None
            for index, element in enumerate(node.list_expr.elements):
                found = literal.type_of(element, optional=index in optional)
                if first is None:
                    first = (element, found)
                elif literal.mismatch(first, element, found):
                    break  # one per list, as cel-go reports
        elif kind == "struct_expr" and not node.struct_expr.message_name:
            first_key: tuple[Any, Any] | None = None
            first_value: tuple[Any, Any] | None = None
            for entry in node.struct_expr.entries:
                key = literal.type_of(entry.map_key)
                value = literal.type_of(entry.value, optional=entry.optional_entry)
                if first_key is None:
                    first_key, first_value = (entry.map_key, key), (entry.value, value)
                    continue
                literal.mismatch(first_key, entry.map_key, key)
                literal.mismatch(first_value, entry.value, value)
    return sorted(problems, key=lambda problem: problem[0])


__all__ = ["equivalent", "has_aggregate_literal", "mismatches"]
