"""What fleet changes in a selector before cel-cpp sees it, so that it answers as cel-go.

Two rewrites, each for one gap between cel-cpp (fleet's CEL) and cel-go (the
API server's and the scheduler's):

* **The checker's text** (:func:`for_checker`). ``device.capacity`` is typed
  through a qualified variable (:mod:`fleet.cel.environments`), which cel-cpp
  resolves even inside ``has()``, and which an alias of ``device`` does not
  reach: in ``cel.bind(d, device, d.capacity['gpu.nvidia.com'].memory > 40)``
  ``d.capacity`` would be the message's dyn map and the misuse would pass. So
  the checker reads ``has(device.capacity)`` as ``has(device.driver  )`` (same
  length) and the alias's uses in the bind's body as ``device``; an
  :class:`Edited` text maps the checker's offsets back to the selector's, so
  problems are reported where the user wrote them.
* **The runtime's program** (:func:`runtime_ast`). In Kubernetes a
  Quantity or Semver compared with a value of another type is a runtime error
  (``Quantity.Equal`` returns no-such-overload; a version attribute compared
  with a string is the usual case); cel-cpp's equality between a message and
  another value is ``false``. Where the checked types say that can happen
  (:func:`strict_equalities`), the ``==``/``!=``
  node of the runtime's checked AST is pointed at ``@kubernetes_equals`` /
  ``@kubernetes_not_equals`` (:mod:`fleet.cel.environments`), names no
  selector can write, and the program is planned from that AST
  (``Env.deserialize``). The same way, a ``double`` operand of ``<``/``>``...
  passes through ``@kubernetes_ordered``, which refuses NaN as cel-go does
  ("NaN values cannot be ordered"; cel-cpp answers false). Other programs are
  left exactly as compiled.
* **Quantity representations** (:func:`integer_questions`). Kubernetes
  answers ``isInteger()``/``asInteger()`` from how the quantity is held, not
  from its value (:mod:`fleet.cel.quantities`), while ``==`` on quantities is
  numeric. A CEL value that carried the representation would break ``==``
  (cel-cpp compares messages field by field, unknown fields included), so only
  the values that flow into ``isInteger()``/``asInteger()`` carry it: in that
  receiver's subtree ``quantity(s)`` becomes ``@quantity_amount(s)`` and
  ``device.capacity`` the activation's ``@capacity_amounts``; ``add``/``sub``
  keep the representation when both operands have one. That subtree feeds
  nothing else, so every other comparison sees plain values.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Any

from fleet.cel import asts
from fleet.cel.environments import CAPACITY_AMOUNTS
from fleet.cel.references import Token, tokenize

EQUALS = "@kubernetes_equals"
QUANTITY_AMOUNT = "@quantity_amount"
QUANTITY = "kubernetes.Quantity"
ORDERED = "@kubernetes_ordered"
NOT_EQUALS = "@kubernetes_not_equals"
KUBERNETES_TYPES = frozenset({"kubernetes.Quantity", "kubernetes.Semver"})
_RELATIONS = frozenset({"_<_", "_<=_", "_>_", "_>=_"})
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter", "bind", "transformList", "transformMap"})


@dataclasses.dataclass(frozen=True)
class Edited:
    """A rewritten text and where its replaced spans came from."""

    text: str
    # (start, end) in text and (start, end) in the original of every replacement, in order
    spans: tuple[tuple[int, int, int, int], ...] = ()

    def original_offset(self, offset: int) -> int:
        """The selector's offset for an offset in :attr:`text` (inside a replacement: its start)."""
        index = bisect.bisect_right([span[0] for span in self.spans], offset) - 1
        if index < 0:
            return offset
        _, end, original_start, original_end = self.spans[index]
        return original_start if offset < end else offset - end + original_end


def _edit(expression: str, replacements: list[tuple[int, int, str]]) -> Edited:
    """Apply (start, end, new text) replacements given in the original's offsets."""
    pieces, spans, position, shift = [], [], 0, 0
    for start, end, new in sorted(replacements):
        pieces += [expression[position:start], new]
        spans.append((start + shift, start + shift + len(new), start, end))
        shift += len(new) - (end - start)
        position = end
    pieces.append(expression[position:])
    return Edited("".join(pieces), tuple(spans))


def _closing(tokens: list[Token], opening: int) -> int:
    depth = 0
    for index in range(opening, len(tokens)):
        if tokens[index].text in ("(", "[", "[?", "{"):
            depth += 1
        elif tokens[index].text in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return index
    return len(tokens)


def _binds(tokens: list[Token], index: int, name: str) -> bool:
    """Whether ``tokens[index]`` opens a macro or bind that declares ``name`` (``x.all(name, ...``)."""
    return (
        tokens[index].text in _MACROS
        and index + 3 < len(tokens)
        and tokens[index + 1].text == "("
        and tokens[index + 2].text == name
        and tokens[index + 3].text == ","
    )


def _alias_uses(tokens: list[Token]) -> set[int]:
    """Indexes of the tokens naming ``device`` through ``cel.bind(d, device, <body>)`` (or an alias of an alias)."""
    uses: set[int] = set()
    for index in range(len(tokens) - 7):
        if [token.text for token in tokens[index : index + 4]] != ["cel", ".", "bind", "("]:
            continue
        alias, init = tokens[index + 4], tokens[index + 6]
        if alias.kind != "ident" or tokens[index + 5].text != "," or tokens[index + 7].text != ",":
            continue
        if init.kind != "ident" or not (init.text == "device" or index + 6 in uses):
            continue
        end = _closing(tokens, index + 3)
        body = range(index + 8, end)
        if any(_binds(tokens, i, alias.text) or _binds(tokens, i, "device") for i in body):
            continue  # shadowed inside the body: left as it is
        for i in body:
            token = tokens[i]
            if token.kind == "ident" and token.text == alias.text and tokens[i - 1].text not in (".", ".?"):
                uses.add(i)
    return uses


def for_checker(expression: str) -> Edited:
    """The text the typed checker sees (see the module docstring)."""
    tokens = tokenize(expression)
    uses = _alias_uses(tokens)
    texts = ["device" if index in uses else token.text for index, token in enumerate(tokens)]
    replacements = [(tokens[i].offset, tokens[i].offset + len(tokens[i].text), "device") for i in sorted(uses)]
    for index in range(len(tokens) - 5):
        if texts[index : index + 6] == ["has", "(", "device", ".", "capacity", ")"]:
            start = tokens[index + 4].offset
            replacements.append((start, start + 8, "driver  "))
    return _edit(expression, replacements) if replacements else Edited(expression)


def _kind(types: Any, node: Any) -> str:
    found = types.get(node.id)
    kind = found.WhichOneof("kind") if found is not None else None
    if kind in (None, "dyn", "type_param", "error"):
        return "dyn"
    if kind == "message_type" and found.message_type in KUBERNETES_TYPES:
        return "kubernetes"
    return "primitive" if kind == "primitive" else "other"


def strict_equalities(checked: Any) -> list[int]:
    """Ids of ``==``/``!=`` where cel-go's equality can fail and cel-cpp's says false.

    cel-go asks the left value: a Quantity or Semver on the left and another
    type on the right is an error. So: a Quantity or Semver against ``dyn``,
    and ``dyn`` (an attribute may be a version) against a Quantity, Semver or
    primitive. ``dyn`` against ``dyn`` is left to cel-cpp (docs/cel.md).
    """
    found = []
    for node in asts.walk(checked.expr):
        if node.WhichOneof("kind") != "call_expr" or node.call_expr.function not in ("_==_", "_!=_"):
            continue
        if len(node.call_expr.args) != 2:
            continue
        left, right = (_kind(checked.type_map, arg) for arg in node.call_expr.args)
        if (left, right) == ("kubernetes", "dyn") or (left == "dyn" and right in ("kubernetes", "primitive")):
            found.append(int(node.id))
    return found


def ordered_operands(checked: Any) -> list[int]:
    """Ids of ``double`` operands of ``<``, ``<=``, ``>``, ``>=``: cel-go refuses to order NaN, cel-cpp says false."""
    found = []
    for node in asts.walk(checked.expr):
        if node.WhichOneof("kind") == "call_expr" and node.call_expr.function in _RELATIONS:
            for arg in node.call_expr.args:
                cel_type = checked.type_map.get(arg.id)
                if cel_type is not None and cel_type.WhichOneof("kind") == "primitive" and cel_type.primitive == 4:
                    found.append(int(arg.id))
    return found


def integer_questions(checked: Any) -> list[int]:
    """Ids of ``q.isInteger()`` / ``q.asInteger()`` calls: they need Kubernetes' representation of ``q``."""
    found = []
    for node in asts.walk(checked.expr):
        call = node.call_expr if node.WhichOneof("kind") == "call_expr" else None
        if (
            call is not None
            and call.function in ("isInteger", "asInteger")
            and call.HasField("target")
            and _kind(checked.type_map, call.target) == "kubernetes"
        ):
            found.append(int(node.id))
    return found


def _is_capacity_map(cel_type: Any) -> bool:
    """``map(string, map(string, kubernetes.Quantity))``: the type of ``device.capacity``."""
    if cel_type is None or cel_type.WhichOneof("kind") != "map_type":
        return False
    inner = cel_type.map_type.value_type
    return inner.WhichOneof("kind") == "map_type" and bool(inner.map_type.value_type.message_type == QUANTITY)


def _with_amounts(node: Any, types: Any) -> None:
    """Make the Quantity that ``node`` computes carry Kubernetes' representation (see the module docstring).

    Only along the path by which the value flows into ``isInteger()``/``asInteger()``:
    ``quantity(s)``, ``device.capacity[...]`` reads, ``add``/``sub``, optionals, ``?:`` and
    literal lists or maps. Anything else (a ``cel.bind`` variable, a function result) keeps
    the plain value, which answers from its value.
    """
    kind = node.WhichOneof("kind")
    if kind == "select_expr":
        if node.select_expr.field == "capacity" and _is_capacity_map(types.get(node.id)):
            node.select_expr.field = CAPACITY_AMOUNTS
        elif not node.select_expr.test_only:
            _with_amounts(node.select_expr.operand, types)
        return
    if kind == "ident_expr":  # device.capacity resolved as one name by the runtime
        return
    if kind == "list_expr":
        for element in node.list_expr.elements:
            _with_amounts(element, types)
        return
    if kind == "struct_expr" and not node.struct_expr.message_name:
        for entry in node.struct_expr.entries:
            _with_amounts(entry.value, types)
        return
    if kind != "call_expr":
        return
    call = node.call_expr
    if call.function == "quantity" and not call.HasField("target") and len(call.args) == 1:
        call.function = QUANTITY_AMOUNT
    elif call.function in ("add", "sub", "orValue") and call.HasField("target"):
        _with_amounts(call.target, types)
        for arg in call.args:
            _with_amounts(arg, types)
    elif call.function == "value" and call.HasField("target"):
        _with_amounts(call.target, types)
    elif call.function in ("_[_]", "_[?_]", "_?._", "optional.of", "optional.ofNonZeroValue") and call.args:
        _with_amounts(call.args[0], types)
    elif call.function == "_?_:_" and len(call.args) == 3:
        _with_amounts(call.args[1], types)
        _with_amounts(call.args[2], types)


def runtime_ast(runtime: Any, *, types: Any, equalities: list[int], ordered: list[int], integers: list[int]) -> bytes:
    """The runtime's checked AST (``serialize()`` bytes) with ``equalities`` strict, ``ordered`` guarded and
    the receivers of the ``integers`` calls carrying Kubernetes' representation; ``types`` is the checker's
    ``type_map`` (the same node ids)."""
    checked = asts.read(runtime.serialize())
    wanted, guarded, questions = set(equalities), set(ordered), set(integers)
    next_id = max(node.id for node in asts.walk(checked.expr)) + 1
    for node in list(asts.walk(checked.expr)):
        if node.id in questions and node.WhichOneof("kind") == "call_expr":
            _with_amounts(node.call_expr.target, types)
        if node.id in wanted and node.WhichOneof("kind") == "call_expr":
            function = node.call_expr.function
            if function in ("_==_", "_!=_"):
                # the reference keeps its overload ids: cel-cpp's planner wants some, and resolves by name
                node.call_expr.function = EQUALS if function == "_==_" else NOT_EQUALS
        if node.id in guarded:
            operand = checked.expr.__class__()
            operand.CopyFrom(node)
            node.Clear()
            node.id = next_id
            node.call_expr.function = ORDERED
            node.call_expr.args.append(operand)
            checked.reference_map[next_id].overload_id.append("kubernetes_ordered_double")
            next_id += 1
    return asts.write(checked)


__all__ = [
    "CAPACITY_AMOUNTS",
    "EQUALS",
    "KUBERNETES_TYPES",
    "NOT_EQUALS",
    "ORDERED",
    "QUANTITY_AMOUNT",
    "Edited",
    "for_checker",
    "integer_questions",
    "ordered_operands",
    "runtime_ast",
    "strict_equalities",
]
