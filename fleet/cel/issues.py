"""Compile problems where the API server puts them: cel-cpp's diagnostics in cel-go's places.

``fleetctl validate`` promises the line and column the API server would report,
and the oracle test holds it to that. cel-cpp (our checker) and cel-go (the API
server's) agree on almost every position — both place a node at its operator:
``.`` for a field, ``(`` for a call, ``[`` for an index — but not on three:

* an undeclared dotted name (``dev.attributes``): cel-cpp points at the last
  ``.``, cel-go at the first identifier;
* a non-bool operand of ``&&``/``||``: cel-cpp reports "no matching overload for
  '_&&_'" at the operator, cel-go "expected type 'bool' but found 'int'" at the
  operand (its root node);
* a namespaced function with wrong arguments (``sets.contains([1])``): cel-cpp
  first reports the namespace as an undeclared reference, cel-go only the
  overload.

The checked AST (:mod:`fleet.cel.asts`) only exists when the check succeeds,
so for these errors the operand's root node is found from the tokens with CEL's
precedence (ternary < ``||`` < ``&&`` < relations < ``+ -`` <
``* / %`` < unary < member/call/index).
"""

from __future__ import annotations

import dataclasses
import re

from fleet.cel.references import Token, tokenize

_LOGICAL = re.compile(r"found no matching overload for '_(&&|\|\|)_' applied to '\((\w+), (\w+)\)'")
_DOTTED = re.compile(r"undeclared reference to '([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)'")
_NAMESPACES = frozenset({"sets", "cel", "optional", "strings", "math"})
_OPEN, _CLOSE = ("(", "[", "[?", "{"), (")", "]", "}")
_LEVELS: tuple[frozenset[str], ...] = (
    frozenset({"?"}),
    frozenset({"||"}),
    frozenset({"&&"}),
    frozenset({"==", "!=", "<", "<=", ">", ">=", "in"}),
    frozenset({"+", "-"}),
    frozenset({"*", "/", "%"}),
)


@dataclasses.dataclass(frozen=True)
class Issue:
    """One compile problem: 1-based line and column, 0-based character offset."""

    message: str
    line: int
    column: int
    offset: int


def position(expression: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset."""
    before = expression[:offset]
    line = before.count("\n") + 1
    return line, offset - (before.rfind("\n") + 1) + 1


def _at(expression: str, message: str, offset: int) -> Issue:
    return Issue(message, *position(expression, offset), offset)


def _is_binary(tokens: list[Token], index: int) -> bool:
    """A ``-`` is binary after an operand, unary otherwise."""
    if index == 0:
        return False
    before = tokens[index - 1]
    return before.kind in ("ident", "number", "string") or before.text in _CLOSE


def root_offset(tokens: list[Token]) -> int:
    """Offset of the root node of the expression made of ``tokens`` (as cel-go positions it)."""
    while len(tokens) > 2 and tokens[0].text == "(" and _closing(tokens, 0) == len(tokens) - 1:
        tokens = tokens[1:-1]
    depth = 0
    best: dict[int, int] = {}
    for index, token in enumerate(tokens):
        if token.text in _OPEN:
            depth += 1
        elif token.text in _CLOSE:
            depth -= 1
        elif depth == 0:
            for level, operators in enumerate(_LEVELS):
                if token.text not in operators or (token.text == "-" and not _is_binary(tokens, index)):
                    continue
                if level or level not in best:  # ?: groups to the right, the others to the left
                    best[level] = index
    if best:
        return tokens[best[min(best)]].offset
    if tokens and tokens[0].text in ("!", "-") and len(tokens) > 1:
        return tokens[0].offset
    depth, last = 0, -1
    for index, token in enumerate(tokens):
        if depth == 0 and index and token.text in (".", ".?", "(", "[", "[?"):
            last = index
        if token.text in _OPEN:
            depth += 1
        elif token.text in _CLOSE:
            depth -= 1
    return tokens[last].offset if last >= 0 else (tokens[0].offset if tokens else 0)


def _closing(tokens: list[Token], start: int) -> int:
    depth = 0
    for index in range(start, len(tokens)):
        if tokens[index].text in _OPEN:
            depth += 1
        elif tokens[index].text in _CLOSE:
            depth -= 1
            if depth == 0:
                return index
    return -1


def _operand(tokens: list[Token], operator: int, *, right: bool) -> list[Token]:
    """The tokens of the left or right operand of the logical operator at index ``operator``."""
    depth = 0
    step = 1 if right else -1
    index = operator + step
    out: list[Token] = []
    while 0 <= index < len(tokens):
        text = tokens[index].text
        opening, closing = (_OPEN, _CLOSE) if right else (_CLOSE, _OPEN)
        if text in opening:
            depth += 1
        elif text in closing:
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and text in ("&&", "||", "?", ":", ","):
            break
        out.append(tokens[index])
        index += step
    return out if right else out[::-1]


def as_kubernetes(expression: str, issues: list[Issue]) -> list[Issue]:
    """``issues`` as cel-go words and places them (see the module docstring)."""
    if len(issues) > 1:
        first = issues[0].message
        name = first.removeprefix("undeclared reference to '").split("'")[0]
        if first.startswith("undeclared reference to '") and name in _NAMESPACES:
            issues = issues[1:]
    out = []
    for issue in issues:
        dotted = _DOTTED.search(issue.message)
        if dotted:
            head = dotted.group(1).rsplit(".", 1)[0]
            start = issue.offset - len(head)
            if start >= 0 and expression[start : issue.offset] == head:
                issue = _at(expression, issue.message, start)
        logical = _LOGICAL.search(issue.message)
        if logical:
            tokens = tokenize(expression)
            operator = next((i for i, t in enumerate(tokens) if t.offset == issue.offset), None)
            if operator is not None:
                left, right = logical.group(2), logical.group(3)
                bad, found = (False, left) if left not in ("bool", "dyn") else (True, right)
                operand = _operand(tokens, operator, right=bad)
                if operand:
                    issue = _at(expression, f"expected type 'bool' but found '{found}'", root_offset(operand))
        out.append(issue)
    return out


__all__ = ["Issue", "as_kubernetes", "position", "root_offset"]
