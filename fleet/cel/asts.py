"""cel-cpp's checked AST, read back from ``Expression.serialize()``.

cel-expr-python has no AST API, but ``serialize()`` returns a
``google.protobuf.Any`` holding ``cel.expr.CheckedExpr``: every node with its
id, the type the checker gave it (``type_map``), its character offset
(``source_info.positions``) and the overloads it resolved to. That is enough to
do what cel-cpp's checker does not and cel-go's does (homogeneous aggregate
literals, :mod:`fleet.cel.literals`) and to rewrite a checked program before
the runtime plans it (``Env.deserialize`` takes the same bytes back,
:mod:`fleet.cel.rewrites`).

No package ships the ``cel.expr`` protos for Python, so the messages are built
here from the subset of ``cel/expr/checked.proto`` and ``syntax.proto``
(cel.dev/expr v0.25.1) that fleet reads, with the same field numbers. Fields
left out survive a parse/serialize round trip as unknown fields. The subset is
declared proto2 so that ``Type.null`` and ``Constant.null_value`` (enum value
0) keep their presence.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from google.protobuf import (  # type: ignore[import-untyped]
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    message_factory,
)

_PACKAGE = "fleet.celexpr"
_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "string": _F.TYPE_STRING,
    "int64": _F.TYPE_INT64,
    "int32": _F.TYPE_INT32,
    "uint64": _F.TYPE_UINT64,
    "bool": _F.TYPE_BOOL,
    "double": _F.TYPE_DOUBLE,
    "bytes": _F.TYPE_BYTES,
    "enum": _F.TYPE_INT32,  # enums travel as varints
}
# message: [(field, number, spec)], spec "*x" = repeated, "map:k:v" = map
_MESSAGES: dict[str, list[tuple[str, int, str]]] = {
    "CheckedExpr": [
        ("reference_map", 2, "map:int64:Reference"),
        ("type_map", 3, "map:int64:Type"),
        ("expr", 4, "Expr"),
        ("source_info", 5, "SourceInfo"),
    ],
    "Reference": [("name", 1, "string"), ("overload_id", 3, "*string")],
    "Empty": [],
    "Type": [
        ("dyn", 1, "Empty"),
        ("null", 2, "enum"),
        ("primitive", 3, "enum"),
        ("wrapper", 4, "enum"),
        ("well_known", 5, "enum"),
        ("list_type", 6, "ListType"),
        ("map_type", 7, "MapType"),
        ("function", 8, "FunctionType"),
        ("message_type", 9, "string"),
        ("type_param", 10, "string"),
        ("type", 11, "Type"),
        ("error", 12, "Empty"),
        ("abstract_type", 14, "AbstractType"),
    ],
    "ListType": [("elem_type", 1, "Type")],
    "MapType": [("key_type", 1, "Type"), ("value_type", 2, "Type")],
    "FunctionType": [("result_type", 1, "Type"), ("arg_types", 2, "*Type")],
    "AbstractType": [("name", 1, "string"), ("parameter_types", 2, "*Type")],
    "Expr": [
        ("id", 2, "int64"),
        ("const_expr", 3, "Constant"),
        ("ident_expr", 4, "Ident"),
        ("select_expr", 5, "Select"),
        ("call_expr", 6, "Call"),
        ("list_expr", 7, "CreateList"),
        ("struct_expr", 8, "CreateStruct"),
        ("comprehension_expr", 9, "Comprehension"),
    ],
    "Constant": [
        ("null_value", 1, "enum"),
        ("bool_value", 2, "bool"),
        ("int64_value", 3, "int64"),
        ("uint64_value", 4, "uint64"),
        ("double_value", 5, "double"),
        ("string_value", 6, "string"),
        ("bytes_value", 7, "bytes"),
    ],
    "Ident": [("name", 1, "string")],
    "Select": [("operand", 1, "Expr"), ("field", 2, "string"), ("test_only", 3, "bool")],
    "Call": [("target", 1, "Expr"), ("function", 2, "string"), ("args", 3, "*Expr")],
    "CreateList": [("elements", 1, "*Expr"), ("optional_indices", 2, "*int32")],
    "CreateStruct": [("message_name", 1, "string"), ("entries", 2, "*Entry")],
    "Entry": [
        ("id", 1, "int64"),
        ("field_key", 2, "string"),
        ("map_key", 3, "Expr"),
        ("value", 4, "Expr"),
        ("optional_entry", 5, "bool"),
    ],
    "Comprehension": [
        ("iter_var", 1, "string"),
        ("iter_range", 2, "Expr"),
        ("accu_var", 3, "string"),
        ("accu_init", 4, "Expr"),
        ("loop_condition", 5, "Expr"),
        ("loop_step", 6, "Expr"),
        ("result", 7, "Expr"),
        ("iter_var2", 8, "string"),
    ],
    "SourceInfo": [("line_offsets", 3, "*int32"), ("positions", 4, "map:int64:int32")],
}
_ONEOFS = {"Type": frozenset(), "Expr": frozenset({"id"}), "Constant": frozenset()}  # fields outside the oneof
PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
WELL_KNOWN = {1: "any", 2: "google.protobuf.Timestamp", 3: "google.protobuf.Duration"}


def _add_message(file: Any, name: str, fields: list[tuple[str, int, str]]) -> None:
    message = file.message_type.add(name=name)
    if name in _ONEOFS:
        message.oneof_decl.add(name="kind")
    for field_name, number, spec in fields:
        label = _F.LABEL_OPTIONAL
        if spec.startswith("*"):
            label, spec = _F.LABEL_REPEATED, spec[1:]
        if spec.startswith("map:"):
            _, key, value = spec.split(":")
            entry = message.nested_type.add(name="".join(part.title() for part in field_name.split("_")) + "Entry")
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, type=_SCALARS[key], label=_F.LABEL_OPTIONAL)
            value_field = entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL)
            _set_type(value_field, value)
            message.field.add(
                name=field_name,
                number=number,
                type=_F.TYPE_MESSAGE,
                type_name=f".{_PACKAGE}.{name}.{entry.name}",
                label=_F.LABEL_REPEATED,
            )
            continue
        field = message.field.add(name=field_name, number=number, label=label)
        _set_type(field, spec)
        if name in _ONEOFS and field_name not in _ONEOFS[name] and label != _F.LABEL_REPEATED:
            field.oneof_index = 0


def _set_type(field: Any, spec: str) -> None:
    if spec in _SCALARS:
        field.type = _SCALARS[spec]
    else:
        field.type = _F.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{spec}"


@functools.cache
def classes() -> dict[str, Any]:
    """The message classes of the subset, by name (built once)."""
    file = descriptor_pb2.FileDescriptorProto(name="fleet_cel_expr_subset.proto", package=_PACKAGE, syntax="proto2")
    for name, fields in _MESSAGES.items():
        _add_message(file, name, fields)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")) for name in _MESSAGES
    }


def read(serialized: bytes) -> Any:
    """The ``CheckedExpr`` inside ``Expression.serialize()``'s ``Any``."""
    envelope = any_pb2.Any()
    envelope.ParseFromString(serialized)
    checked = classes()["CheckedExpr"]()
    checked.ParseFromString(envelope.value)
    return checked


def write(checked: Any, type_url: str = "type.googleapis.com/cel.expr.CheckedExpr") -> bytes:
    """``checked`` wrapped as ``Env.deserialize`` expects it."""
    return bytes(any_pb2.Any(type_url=type_url, value=checked.SerializeToString()).SerializeToString())


def children(node: Any) -> Iterator[Any]:
    """The direct sub-expressions of ``node``, in source order."""
    kind = node.WhichOneof("kind")
    if kind == "select_expr":
        yield node.select_expr.operand
    elif kind == "call_expr":
        if node.call_expr.HasField("target"):
            yield node.call_expr.target
        yield from node.call_expr.args
    elif kind == "list_expr":
        yield from node.list_expr.elements
    elif kind == "struct_expr":
        for entry in node.struct_expr.entries:
            if entry.HasField("map_key"):
                yield entry.map_key
            yield entry.value
    elif kind == "comprehension_expr":
        loop = node.comprehension_expr
        yield from (loop.iter_range, loop.accu_init, loop.loop_condition, loop.loop_step, loop.result)


def walk(node: Any) -> Iterator[Any]:
    """``node`` and every node below it, parents first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(children(current))))


def type_name(cel_type: Any) -> str:
    """A type as cel-go writes it in messages (``list(int)``, ``map(string, dyn)``, ``kubernetes.Quantity``)."""
    kind = cel_type.WhichOneof("kind")
    if kind == "primitive":
        return PRIMITIVES.get(cel_type.primitive, "unknown")
    if kind == "wrapper":
        return f"wrapper({PRIMITIVES.get(cel_type.wrapper, 'unknown')})"
    if kind == "well_known":
        return WELL_KNOWN.get(cel_type.well_known, "unknown")
    if kind == "list_type":
        return f"list({type_name(cel_type.list_type.elem_type)})"
    if kind == "map_type":
        return f"map({type_name(cel_type.map_type.key_type)}, {type_name(cel_type.map_type.value_type)})"
    if kind == "message_type":
        return str(cel_type.message_type)
    if kind == "type_param":
        return str(cel_type.type_param)
    if kind == "type":
        return f"type({type_name(cel_type.type)})"
    if kind == "abstract_type":
        params = ", ".join(type_name(param) for param in cel_type.abstract_type.parameter_types)
        return f"{cel_type.abstract_type.name}({params})" if params else str(cel_type.abstract_type.name)
    if kind == "null":
        return "null_type"
    if kind == "error":
        return "*error*"
    return "dyn"


__all__ = ["PRIMITIVES", "WELL_KNOWN", "children", "classes", "read", "type_name", "walk", "write"]
