"""Compile and evaluate DRA device selectors with Kubernetes' rules.

Compile (``compile_selector``), as the API server does in
``validateCELSelector``: at most 10 KiB, type-checked against the types
Kubernetes declares for ``device`` (``capacity`` values are Quantities,
``driver`` a string, unknown ``device.<field>`` names are errors; see
:mod:`fleet.cel.environments`), result type ``bool`` (or the attribute
"unknown" type). Every problem carries line, column and offset inside the
expression so ``fleetctl validate`` can point at the YAML file.

Evaluate (``Selector.evaluate``), as the scheduler does in ``DeviceMatches``:
an unknown attribute name in a known domain is an *error* (``no such key``),
never false; an unknown domain is an empty map; a non-bool result is an error.
Errors are raised as :class:`SelectorRuntimeError`; the allocator treats them
as "this claim cannot be allocated", like the scheduler.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

from cel_expr_python import cel

from fleet.cel import asts, literals, rewrites, standards
from fleet.cel.devices import Device, Projection, activation, projection
from fleet.cel.environments import Environment, dra_environment
from fleet.cel.issues import Issue, as_kubernetes, position
from fleet.cel.references import Clause, References, Token, find_references, split_clauses, tokenize
from fleet.errors import FleetError

MAX_EXPRESSION_LENGTH = 10 * 1024  # resourceapi.CELSelectorExpressionMaxLength, in bytes
_ISSUE = re.compile(r"ERROR: <input>:(\d+):(\d+): (.*?)(?:\n \|.*?)*(?=\nERROR: |\Z)", re.DOTALL)
_STATUS = re.compile(r"^[A-Z_]+: ")
_NO_SUCH_KEY = re.compile(r'Key not found in map\s*:\s*"?(.*?)"?\s*$')
_TYPE_NAMES = {
    "BOOL": "bool",
    "INT": "int",
    "UINT": "uint",
    "DOUBLE": "double",
    "STRING": "string",
    "BYTES": "bytes",
    "DYN": "dyn",
    "NULL": "null_type",
    "LIST": "list",
    "MAP": "map",
}


class SelectorCompileError(FleetError):
    """The selector does not compile; ``issues`` has the positions (first one in ``what``)."""

    def __init__(self, expression: str, issues: list[Issue], *, hint: str = "") -> None:
        first = issues[0]
        super().__init__(
            f"CEL selector does not compile: {first.message}",
            where=f"expression line {first.line}, column {first.column}",
            hint=hint or "fix the expression; the DRA CEL environment is described in docs/cel.md",
        )
        self.expression = expression
        self.issues = issues


class SelectorRuntimeError(FleetError):
    """The selector failed on a device, as the scheduler would: the claim cannot be allocated."""


def offset_of(expression: str, line: int, column: int) -> int:
    lines = expression.split("\n")
    return sum(len(text) + 1 for text in lines[: line - 1]) + column - 1


def _issues_from(expression: str, text: str, edited: rewrites.Edited | None = None) -> list[Issue]:
    """cel-cpp's diagnostics for ``expression``; positions in ``edited.text`` are mapped back."""
    issues = []
    for match in _ISSUE.finditer(_STATUS.sub("", text, count=1)):
        line, column = int(match.group(1)), int(match.group(2))
        message = match.group(3).strip()
        if edited is None:
            issues.append(Issue(message, line, column, offset_of(expression, line, column)))
        else:
            offset = edited.original_offset(offset_of(edited.text, line, column))
            issues.append(Issue(message, *position(expression, offset), offset))
    return issues or [Issue(_STATUS.sub("", text).strip(), 1, 1, 0)]


def runtime_message(text: str) -> str:
    """cel-cpp's status text in Kubernetes' words (``no such key: minor``)."""
    text = _STATUS.sub("", str(text)).strip()
    match = _NO_SUCH_KEY.search(text)
    if match:
        return f"no such key: {match.group(1)}"
    return text


@dataclasses.dataclass(frozen=True, eq=False)
class Selector:
    """A compiled selector; evaluate it on a :class:`Device` or on a projection of one."""

    expression: str
    references: References
    clauses: tuple[Clause, ...]
    _program: Any = dataclasses.field(repr=False)
    _environment: Environment = dataclasses.field(repr=False)
    _amounts: bool = dataclasses.field(default=False, repr=False)  # the program reads @capacity_amounts

    def evaluate(self, device: Device) -> bool:
        return self.evaluate_projection(projection(device, self.references))

    def evaluate_projection(self, key: Projection) -> bool:
        """Evaluate on a projection built with references covering this selector's."""
        device = activation(self._environment.types, key, amounts=self._amounts)
        result = self._program.eval(data={"device": device})
        kind = result.type()
        if kind == cel.Type.BOOL:
            return bool(result.value())
        if kind == cel.Type.ERROR:
            raise SelectorRuntimeError(
                f"CEL runtime error: {runtime_message(result.value())}",
                hint="guard optional attributes with has(...) or use optional chaining (.? followed by orValue())",
            )
        raise SelectorRuntimeError(
            f"CEL result of type {_TYPE_NAMES.get(kind.name(), kind.name())} could not be converted to bool",
            hint="a selector must evaluate to true or false",
        )


def _check_length(expression: str) -> None:
    size = len(expression.encode())
    if size > MAX_EXPRESSION_LENGTH:
        raise SelectorCompileError(
            expression,
            [
                Issue(
                    f"expression is {size} bytes, longer than the limit of {MAX_EXPRESSION_LENGTH} bytes",
                    *position(expression, 0),
                    0,
                )
            ],
            hint="split the selector or move the common part into the DeviceClass",
        )


def _check_regex_literals(expression: str, environment: Environment) -> None:
    """Literal patterns of matches/find/findAll must be valid RE2, as cel-go's validators demand."""
    tokens = tokenize(expression)
    for index in range(1, len(tokens) - 3):
        name, literal = tokens[index], tokens[index + 2]
        if not (
            name.text in ("matches", "find", "findAll")
            and tokens[index - 1].text == "."
            and tokens[index + 1].text == "("
            and literal.kind == "string"
            and tokens[index + 3].text in (")", ",")
        ):
            continue
        try:
            probe = environment.env.compile(f"''.matches({literal.text})").eval()
        except RuntimeError:
            continue  # not a string literal the checker accepts; the real compile reports it
        if probe.type() == cel.Type.ERROR:
            detail = runtime_message(probe.value())
            raise SelectorCompileError(
                expression,
                [
                    Issue(
                        f"invalid {name.text} argument: {detail}", *position(expression, literal.offset), literal.offset
                    )
                ],
                hint="the pattern is RE2 syntax (no lookaround or backreferences)",
            )


def _hint(issues: list[Issue]) -> str:
    message = issues[0].message
    if "not found in struct" in message or "undefined field" in message:
        return "device has the fields driver, attributes, capacity and allowMultipleAllocations"
    if "kubernetes.Quantity" in message:
        return (
            "capacities are Quantities: compare with quantity(), e.g. "
            "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('40Gi')) or .compareTo(quantity(...)) >= 0"
        )
    if "kubernetes.Semver" in message:
        return "versions are Semvers: compare with semver(), e.g. .isGreaterThan(semver('580.0.0'))"
    return ""


_TREE_TOKENS = frozenset({"==", "!=", "<", "<=", ">", ">=", "in", "isInteger", "asInteger"})


def _needs_tree(tokens: list[Token]) -> bool:
    """Whether the checked AST has something to say: a literal, an equality, a relation, an integer question."""
    return literals.has_aggregate_literal(tokens) or any(token.text in _TREE_TOKENS for token in tokens)


def _compile(expression: str, environment: Environment) -> Selector:
    _check_length(expression)
    references = find_references(expression)
    tokens = tokenize(expression)
    edited = rewrites.for_checker(expression, tokens)
    try:
        checked = environment.checker.compile(edited.text)
    except RuntimeError as err:
        issues = as_kubernetes(expression, _issues_from(expression, str(err), edited))
        raise SelectorCompileError(expression, issues, hint=_hint(issues)) from None
    tree = asts.read(checked.serialize()) if _needs_tree(tokens) else None
    nodes = list(asts.walk(tree.expr)) if tree is not None else []
    if tree is not None and literals.has_aggregate_literal(tokens):
        problems = literals.mismatches(tree, nodes)
        if problems:
            issues = []
            for offset, message in problems:
                where = edited.original_offset(offset)
                issues.append(Issue(message, *position(expression, where), where))
            raise SelectorCompileError(
                expression, issues, hint="the elements of a list literal (keys and values of a map) share one type"
            )
    try:
        program = environment.env.compile(expression)
    except RuntimeError as err:
        raise SelectorCompileError(expression, _issues_from(expression, str(err))) from None
    strict = rewrites.strict_equalities(tree, nodes) if tree is not None else []
    ordered = rewrites.ordered_operands(tree, nodes) if tree is not None else []
    integers = rewrites.integer_questions(tree, nodes) if tree is not None else []
    constant_lists = rewrites.constant_memberships(tree, nodes) if tree is not None else []
    memberships = rewrites.memberships(tree, nodes) if tree is not None else []
    if tree is not None and (strict or ordered or integers or memberships or constant_lists):
        edited_ast = rewrites.runtime_ast(
            program,
            types=tree.type_map,
            equalities=strict,
            ordered=ordered,
            integers=integers,
            memberships=memberships,
            constant_lists=constant_lists,
        )
        program = environment.env.deserialize(edited_ast)
    _check_regex_literals(expression, environment)
    returned = checked.return_type()
    if returned not in (cel.Type.BOOL, cel.Type.DYN):
        name = _TYPE_NAMES.get(returned.name(), returned.name())
        raise SelectorCompileError(
            expression,
            [Issue(f"must evaluate to bool or the unknown type, not {name}", 1, 1, 0)],
            hint="end the expression with a comparison, e.g. ... == 'value'",
        )
    amounts = bool(integers)
    return Selector(expression, references, tuple(split_clauses(expression)), program, environment, amounts)


@functools.lru_cache(maxsize=8192)
def standard_misuses(expression: str, *, lists: bool = False) -> tuple[tuple[Issue, ...], frozenset[str]]:
    """Where ``expression`` uses a standard attribute as a value of another type (:mod:`fleet.cel.standards`),
    and the names it reads so; nothing for a selector that does not compile (its errors come first).
    ``lists``: DRAListTypeAttributes is on, so numaNode may be a list and keeps ``dyn``."""
    tokens = tokenize(expression)
    found = standards.reads(tokens, lists=lists)
    if not found:
        return (), frozenset()
    try:
        compile_selector(expression)
    except SelectorCompileError:
        return (), frozenset()
    environment = dra_environment()
    names = frozenset(read.name for read in found)
    checker = environment.checker_with(tuple((standards.variable(n), standards.TYPES[n]) for n in sorted(names)))
    edited = rewrites.for_checker(expression, tokens, extra=[(r.start, r.end, r.variable) for r in found])
    try:
        checker.compile(edited.text)
    except RuntimeError as err:
        return tuple(_issues_from(expression, str(err), edited)), names
    return (), names


@functools.lru_cache(maxsize=8192)
def compile_selector(expression: str) -> Selector:
    """Compile ``expression`` in the DRA environment (cached by expression text).

    Raises :class:`SelectorCompileError` with positions.
    """
    return _compile(expression, dra_environment())


__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "Issue",
    "Selector",
    "SelectorCompileError",
    "SelectorRuntimeError",
    "compile_selector",
    "offset_of",
    "position",
    "runtime_message",
    "standard_misuses",
]
