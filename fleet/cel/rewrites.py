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
from collections.abc import Sequence
from typing import Any

from fleet.cel import asts
from fleet.cel.environments import CAPACITY_AMOUNTS
from fleet.cel.references import Token, tokenize

EQUALS = "@kubernetes_equals"
IN = "@kubernetes_in"
IN_CONSTANTS = "@kubernetes_in_constants"
QUANTITY_AMOUNT = "@quantity_amount"
QUANTITY = "kubernetes.Quantity"
ORDERED = "@kubernetes_ordered"
NOT_EQUALS = "@kubernetes_not_equals"
KUBERNETES_TYPES = frozenset({"kubernetes.Quantity", "kubernetes.Semver"})
_HASHABLE_CONSTANTS = frozenset({"bool_value", "int64_value", "uint64_value", "double_value", "string_value"})
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


def for_checker(
    expression: str, tokens: list[Token] | None = None, *, extra: Sequence[tuple[int, int, str]] = ()
) -> Edited:
    """The text the typed checker sees (see the module docstring); ``tokens`` of ``expression`` if at hand.

    ``extra``: more (start, end, new text) replacements, spans no other replacement touches
    (:mod:`fleet.cel.standards` types the standard attributes' reads this way)."""
    tokens = tokens if tokens is not None else tokenize(expression)
    uses = _alias_uses(tokens)
    texts = ["device" if index in uses else token.text for index, token in enumerate(tokens)]
    replacements = [(tokens[i].offset, tokens[i].offset + len(tokens[i].text), "device") for i in sorted(uses)]
    for index in range(len(tokens) - 5):
        if texts[index : index + 6] == ["has", "(", "device", ".", "capacity", ")"]:
            start = tokens[index + 4].offset
            replacements.append((start, start + 8, "driver  "))
    replacements += extra
    return _edit(expression, replacements) if replacements else Edited(expression)


def _kind(types: Any, node: Any) -> str:
    found = types.get(node.id)
    kind = found.WhichOneof("kind") if found is not None else None
    if kind in (None, "dyn", "type_param", "error"):
        return "dyn"
    if kind == "message_type" and found.message_type in KUBERNETES_TYPES:
        return "kubernetes"
    if kind in ("list_type", "map_type", "abstract_type") and _may_hold_kubernetes(found):
        return "holder"
    return "primitive" if kind == "primitive" else "other"


def _may_hold_kubernetes(cel_type: Any) -> bool:
    """Whether a value of this type can hold a Quantity or Semver somewhere (``dyn`` can)."""
    kind = cel_type.WhichOneof("kind")
    if kind in (None, "dyn", "type_param", "error"):
        return True
    if kind == "message_type":
        return bool(cel_type.message_type in KUBERNETES_TYPES)
    if kind == "list_type":
        return _may_hold_kubernetes(cel_type.list_type.elem_type)
    if kind == "map_type":
        return _may_hold_kubernetes(cel_type.map_type.value_type)
    return False  # optionals stay cel-cpp's: their values cannot cross into Python


def strict_equalities(checked: Any, nodes: list[Any] | None = None) -> list[int]:
    """Ids of ``==``/``!=`` where cel-go's equality can fail and cel-cpp's says false.

    cel-go asks the left value: a Quantity or Semver on the left and another
    type on the right is an error, and list and map equality skip such errors.
    Quantities compare by value whatever representation they carry
    (:class:`_Amounts`). So: any Quantity or Semver operand, ``dyn`` (an
    attribute may be a version) on the left, and lists, maps or optionals that
    may hold either.
    """
    found = []
    for node in nodes if nodes is not None else asts.walk(checked.expr):
        if node.WhichOneof("kind") != "call_expr" or node.call_expr.function not in ("_==_", "_!=_"):
            continue
        if len(node.call_expr.args) != 2:
            continue
        kinds = {_kind(checked.type_map, arg) for arg in node.call_expr.args}
        if kinds & {"kubernetes", "holder"} or _kind(checked.type_map, node.call_expr.args[0]) == "dyn":
            found.append(int(node.id))
    return found


def constant_memberships(checked: Any, nodes: list[Any] | None = None) -> list[int]:
    """Ids of ``x in [constants]``: cel-go's optimizer turns them into a hash lookup (``OptOptimize``).

    So ``x in []`` is false without evaluating ``x``, and a version attribute
    (a Semver holds slices, which Go cannot hash) is an error there: "internal
    error: runtime error: hash of unhashable type cel.Semver". Only lists of
    bool, int, uint, double and string literals are optimized.
    """
    found = []
    for node in nodes if nodes is not None else asts.walk(checked.expr):
        if node.WhichOneof("kind") != "call_expr" or node.call_expr.function != "@in":
            continue
        if len(node.call_expr.args) != 2 or node.call_expr.args[1].WhichOneof("kind") != "list_expr":
            continue
        listed = node.call_expr.args[1].list_expr
        constants = all(
            element.WhichOneof("kind") == "const_expr" and element.const_expr.WhichOneof("kind") in _HASHABLE_CONSTANTS
            for element in listed.elements
        )
        if constants and not listed.optional_indices:
            found.append(int(node.id))
    return found


def memberships(checked: Any, nodes: list[Any] | None = None) -> list[int]:
    """Ids of ``x in list`` where ``x`` may be a Quantity or Semver: membership by cel-go's ``Equal``."""
    found = []
    for node in nodes if nodes is not None else asts.walk(checked.expr):
        if node.WhichOneof("kind") != "call_expr" or node.call_expr.function != "@in" or len(node.call_expr.args) != 2:
            continue
        value, items = node.call_expr.args
        listed = checked.type_map.get(items.id)
        is_list = listed is not None and listed.WhichOneof("kind") == "list_type"
        if is_list and _kind(checked.type_map, value) in ("kubernetes", "dyn", "holder"):
            found.append(int(node.id))
    return found


def ordered_operands(checked: Any, nodes: list[Any] | None = None) -> list[int]:
    """Ids of ``double`` operands of ``<``, ``<=``, ``>``, ``>=``: cel-go refuses to order NaN, cel-cpp says false."""
    found = []
    for node in nodes if nodes is not None else asts.walk(checked.expr):
        if node.WhichOneof("kind") == "call_expr" and node.call_expr.function in _RELATIONS:
            for arg in node.call_expr.args:
                cel_type = checked.type_map.get(arg.id)
                if cel_type is not None and cel_type.WhichOneof("kind") == "primitive" and cel_type.primitive == 4:
                    found.append(int(arg.id))
    return found


def integer_questions(checked: Any, nodes: list[Any] | None = None) -> list[int]:
    """Ids of ``q.isInteger()`` / ``q.asInteger()`` calls: they need Kubernetes' representation of ``q``."""
    found = []
    for node in nodes if nodes is not None else asts.walk(checked.expr):
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


class _Amounts:
    """Rewrites the receivers of ``isInteger()``/``asInteger()`` to carry Kubernetes' representation.

    Only along the path by which the value flows into the call: ``quantity(s)``,
    ``device.capacity[...]`` reads, ``add``/``sub``, optionals, ``?:``, literal
    lists and maps, the elements of a comprehension (its range carries the
    representation; every comparison of quantities is by value, see
    :func:`strict_equalities`), and ``cel.bind`` variables: ``cel.bind(q, init, body)``
    gains a twin, ``cel.bind(q@amount, init', body)`` with ``init'`` rewritten
    the same way and evaluated where ``init`` is (CEL is pure), and the
    receiver reads ``q@amount`` (a name no selector can write or shadow). Any
    other source (a function result, a comprehension variable) keeps the plain
    value, which answers from its value.
    """

    def __init__(self, checked: Any, types: Any, next_id: int) -> None:
        self.types, self.next_id = types, next_id
        self.references = checked.reference_map  # cel-cpp's planner resolves an ident by its reference's name
        self.bound: dict[int, Any] = {}  # ident node id -> the cel.bind comprehension that declares it
        self.twins: dict[int, Any] = {}  # cel.bind comprehension id -> the comprehension, needing a twin
        self.ranges: set[int] = set()  # comprehensions whose range now carries representations
        self._scope(checked.expr, {})

    def _scope(self, node: Any, names: dict[str, Any]) -> None:
        kind = node.WhichOneof("kind")
        if kind == "ident_expr":
            if names.get(node.ident_expr.name) is not None:
                self.bound[node.id] = names[node.ident_expr.name]
            return
        if kind != "comprehension_expr":
            for child in asts.children(node):
                self._scope(child, names)
            return
        loop = node.comprehension_expr
        self._scope(loop.iter_range, names)
        self._scope(loop.accu_init, names)
        inner = {**names, **dict.fromkeys({loop.iter_var, loop.iter_var2, loop.accu_var} - {""})}
        if _is_bind(node):
            inner[loop.accu_var] = node
        elif loop.iter_var and not loop.iter_var2:
            inner[loop.iter_var] = ("range", node)
        for child in (loop.loop_condition, loop.loop_step, loop.result):
            self._scope(child, inner)

    def rewrite(self, node: Any) -> None:
        kind = node.WhichOneof("kind")
        if kind == "select_expr":
            if node.select_expr.field == "capacity" and _is_capacity_map(self.types.get(node.id)):
                node.select_expr.field = CAPACITY_AMOUNTS
            elif not node.select_expr.test_only:
                self.rewrite(node.select_expr.operand)
        elif kind == "ident_expr" and isinstance(self.bound.get(node.id), tuple):
            # a comprehension's element: its range carries the representation, so the element does
            loop = self.bound[node.id][1]
            if loop.id not in self.ranges and not _wrapped_in_optional(loop, node.ident_expr.name):
                self.ranges.add(loop.id)
                self.rewrite(loop.comprehension_expr.iter_range)
        elif kind == "ident_expr" and node.id in self.bound:
            bind = self.bound[node.id]
            self.twins[bind.id] = bind
            node.ident_expr.name += _TWIN
            if node.id in self.references:
                self.references[node.id].name = node.ident_expr.name
        elif kind == "list_expr":
            for element in node.list_expr.elements:
                self.rewrite(element)
        elif kind == "struct_expr" and not node.struct_expr.message_name:
            for entry in node.struct_expr.entries:
                self.rewrite(entry.value)
        elif kind == "comprehension_expr":  # map()/filter(): the list they build
            self.rewrite(node.comprehension_expr.loop_step)
            self.rewrite(node.comprehension_expr.result)
        elif kind == "call_expr":
            self._call(node.call_expr)

    def _call(self, call: Any) -> None:
        if call.function == "quantity" and not call.HasField("target") and len(call.args) == 1:
            call.function = QUANTITY_AMOUNT
        elif call.function in ("add", "sub", "orValue") and call.HasField("target"):
            self.rewrite(call.target)
            for arg in call.args:
                self.rewrite(arg)
        elif call.function == "value" and call.HasField("target"):
            self.rewrite(call.target)
        elif call.function in ("_[_]", "_[?_]", "_?._", "optional.of", "optional.ofNonZeroValue") and call.args:
            self.rewrite(call.args[0])
        elif call.function == "_?_:_" and len(call.args) == 3:
            self.rewrite(call.args[1])
            self.rewrite(call.args[2])
        elif call.function == "_+_":  # a list being built: quantities have no +
            for arg in call.args:
                self.rewrite(arg)

    def _fresh(self, node: Any) -> None:
        for part in asts.walk(node):
            part.id, self.next_id = self.next_id, self.next_id + 1
            if part.WhichOneof("kind") == "struct_expr":
                for entry in part.struct_expr.entries:
                    entry.id, self.next_id = self.next_id, self.next_id + 1

    def add_twins(self, root: Any) -> None:
        """Give every cel.bind whose variable a receiver reads its ``@amount`` twin (innermost first)."""
        binds = [node for node in asts.walk(root) if node.id in self.twins]
        for bind in reversed(binds):
            loop = bind.comprehension_expr
            twin = bind.__class__()
            twin.comprehension_expr.CopyFrom(loop)  # iter_var, empty range, loop condition: as the macro has them
            twin.comprehension_expr.accu_var = loop.accu_var + _TWIN
            twin.comprehension_expr.loop_step.ident_expr.name = loop.accu_var + _TWIN
            twin.comprehension_expr.ClearField("result")
            self.rewrite(twin.comprehension_expr.accu_init)  # ids still the checker's
            self._fresh(twin)
            twin.comprehension_expr.result.CopyFrom(loop.result)
            loop.result.CopyFrom(twin)


_TWIN = "@amount"


def _wrapped_in_optional(loop: Any, name: str) -> bool:
    """Whether the loop puts its element into an optional, whose ``==`` cel-cpp keeps (field by field)."""
    for node in asts.walk(loop.comprehension_expr.loop_step):
        call = node.call_expr if node.WhichOneof("kind") == "call_expr" else None
        if (
            call is not None
            and call.function.startswith("optional.")
            and any(
                part.WhichOneof("kind") == "ident_expr" and part.ident_expr.name == name for part in asts.walk(node)
            )
        ):
            return True
    return False


def _is_bind(node: Any) -> bool:
    """``cel.bind(v, init, body)`` as the macro expands it: a comprehension over ``[]`` with accumulator ``v``."""
    loop = node.comprehension_expr
    return (
        loop.iter_range.WhichOneof("kind") == "list_expr"
        and not loop.iter_range.list_expr.elements
        and loop.loop_step.WhichOneof("kind") == "ident_expr"
        and loop.loop_step.ident_expr.name == loop.accu_var
    )


def runtime_ast(
    runtime: Any,
    *,
    types: Any,
    equalities: list[int],
    ordered: list[int],
    integers: list[int],
    memberships: Sequence[int] = (),
    constant_lists: Sequence[int] = (),
) -> bytes:
    """The runtime's checked AST (``serialize()`` bytes) with ``equalities`` strict, ``ordered`` guarded and
    the receivers of the ``integers`` calls carrying Kubernetes' representation; ``types`` is the checker's
    ``type_map`` (the same node ids). One pass per rewrite, each over the tree the previous one left."""
    checked = asts.read(runtime.serialize())
    amounts = _Amounts(checked, types, max(node.id for node in asts.walk(checked.expr)) + 1)
    for node in list(asts.walk(checked.expr)):
        if node.id in integers and node.WhichOneof("kind") == "call_expr":
            amounts.rewrite(node.call_expr.target)
    amounts.add_twins(checked.expr)
    for node in asts.walk(checked.expr):
        if node.id in equalities and node.WhichOneof("kind") == "call_expr":
            function = node.call_expr.function
            if function in ("_==_", "_!=_"):
                # the reference keeps its overload ids: cel-cpp's planner wants some, and resolves by name
                node.call_expr.function = EQUALS if function == "_==_" else NOT_EQUALS
    for node in asts.walk(checked.expr):
        if node.id in memberships and node.id not in constant_lists and node.WhichOneof("kind") == "call_expr":
            node.call_expr.function = IN
        if node.id in constant_lists and node.WhichOneof("kind") == "call_expr":
            if node.call_expr.args[1].list_expr.elements:
                node.call_expr.function = IN_CONSTANTS
            else:  # x in []: false, x not evaluated
                node.ClearField("call_expr")
                node.const_expr.bool_value = False
                if node.id in checked.reference_map:
                    del checked.reference_map[node.id]
    next_id = amounts.next_id
    for node in reversed([node for node in asts.walk(checked.expr) if node.id in ordered]):  # innermost first
        operand = node.__class__()
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
    "IN",
    "IN_CONSTANTS",
    "KUBERNETES_TYPES",
    "NOT_EQUALS",
    "ORDERED",
    "QUANTITY_AMOUNT",
    "Edited",
    "constant_memberships",
    "for_checker",
    "integer_questions",
    "memberships",
    "ordered_operands",
    "runtime_ast",
    "strict_equalities",
]
