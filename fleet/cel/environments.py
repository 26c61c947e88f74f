"""The DRA CEL environment on cel-expr-python (Google's cel-cpp binding).

Why cel-cpp: it is the only Python CEL runtime with a type checker, so
``productName.lowerAsci()``, ``quantity(40)`` or ``dev.attributes`` fail at
compile time with line and column, as they fail in the API server — the other
two runtimes accept them and fail later, if at all (docs/cel.md has the
measurements).

What Kubernetes declares and how it is mirrored here:

* ``device``: ``kubernetes.DRADevice`` in Go (k8s.io/dynamic-resource-allocation
  v0.37.2 ``cel/compile.go``, as the API server checks a new selector): ``driver``
  string, ``allowMultipleAllocations`` bool, ``attributes``
  ``map(string, map(string, dyn))`` and ``capacity``
  ``map(string, map(string, Quantity))``. cel-cpp types objects only through
  protobuf messages, and a protobuf map cannot hold maps, so there are two
  environments over the same functions:

  - the *checker* (``Environment.checker``) declares ``device`` as a message
    ``kubernetes.DRADevice`` (so ``device.drvier`` is "undefined field" and
    ``device['driver']`` has no overload, at the positions the API server
    reports), with ``attributes`` as ``map<string, google.protobuf.Struct>``
    (= ``map(string, map(string, dyn))``), plus the *qualified variable*
    ``device.capacity`` typed ``map(string, map(string, Quantity))``: CEL
    resolves ``device.capacity`` to the longest declared name, so
    ``device.capacity['gpu.nvidia.com'].memory > 40`` fails to type-check as it
    does in Kubernetes. Only ``compile_selector`` uses it, for errors and the
    result type; it never evaluates (its ``device`` would have to be a message,
    which cannot carry Quantity maps).
  - the *runtime* (``Environment.env``) declares ``device`` as
    ``map(string, dyn)`` and evaluates the same expression text; it accepts
    everything the checker accepts, and the values are the same, so the
    results are those of the typed program.
* ``kubernetes.Quantity`` / ``kubernetes.Semver``: cel-cpp cannot carry opaque
  Python objects, so both are protobuf messages built at run time (one string
  field for the canonical quantity, so message equality is numeric equality;
  major/minor/patch/prerelease for semver, no build metadata, matching
  ``Version.EQ``). The checker sees two distinct types, so
  ``quantity('1').isGreaterThan(semver('1.0.0'))`` is a compile error as in
  Kubernetes.
* cel-cpp's runtime registry dispatches on the value *kind* (both types are
  "message"), so an overloaded member such as ``isGreaterThan`` gets one
  implementation that dispatches on the message type; the other overloads are
  declarations for the checker only.
* Library functions follow k8s.io/apiserver v0.37.2 exactly, including that
  ``sign`` is declared as a global function (``sign(q)``), not a member.
* Relations across numeric types (``1.0 < 2``, ``q.asApproximateFloat() > 40``):
  cel-go's standard library declares them when Kubernetes turns on
  ``CrossTypeNumericComparisons``; cel-cpp's checker has the option but
  cel-expr-python does not expose it, and refuses a second declaration of a
  built-in operator. So the environment leaves ``_<_``, ``_<=_``, ``_>_`` and
  ``_>=_`` out of the standard library (the env config's ``exclude_functions``)
  and declares them again with every overload cel-go has, cross-type ones
  included. The declarations carry no implementation: cel-cpp's runtime
  already implements all of them (it compares numbers across types).
* ``ext_strings`` (``lowerAscii``, ``split``, ...), ``ext_optional``
  (``.?x``, ``orValue``) and ``ext_bindings`` (``cel.bind``) come with
  cel-expr-python.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from google.protobuf import (  # type: ignore[import-untyped]
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    struct_pb2,
)

from fleet.cel import extensions, quantities, semvers

QUANTITY_TYPE = "kubernetes.Quantity"
SEMVER_TYPE = "kubernetes.Semver"
DEVICE_TYPE = "kubernetes.DRADevice"
CAPACITY_AMOUNTS = "@capacity_amounts"  # device's capacities with Kubernetes' representation (rewrites.py)


class Types:
    """The protobuf classes of the two Kubernetes value types and converters to/from Python."""

    def __init__(self) -> None:
        file = descriptor_pb2.FileDescriptorProto(
            name="fleet_kubernetes_cel.proto", package="kubernetes", syntax="proto3"
        )
        string_field = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
        uint_field = descriptor_pb2.FieldDescriptorProto.TYPE_UINT64
        optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
        quantity = file.message_type.add(name="Quantity")
        quantity.field.add(name="value", number=1, type=string_field, label=optional)
        # Kubernetes' representation (see fleet.cel.quantities), set only on the values that
        # rewrites.amounts_for_integers routes into isInteger()/asInteger(): unset everywhere
        # else, so that message equality stays numeric equality.
        int64_field, int32_field = (
            descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
            descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
        )
        quantity.field.add(name="amount_kind", number=2, type=int32_field, label=optional)  # 1 int64Amount, 2 inf.Dec
        quantity.field.add(name="amount_value", number=3, type=int64_field, label=optional)
        quantity.field.add(name="amount_scale", number=4, type=int32_field, label=optional)
        semver = file.message_type.add(name="Semver")
        for number, name in enumerate(("major", "minor", "patch"), start=1):
            semver.field.add(name=name, number=number, type=uint_field, label=optional)
        semver.field.add(name="pre", number=4, type=string_field, label=optional)
        self.pool = descriptor_pool.DescriptorPool()
        self.pool.Add(file)
        for proto in _device_file():
            self.pool.Add(proto)
        self.quantity_class = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(QUANTITY_TYPE))
        self.semver_class = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(SEMVER_TYPE))

    def quantity_message(self, value: quantities.Quantity, *, amount: bool = False) -> Any:
        """The CEL value; with ``amount``, Kubernetes' representation too, where it is known."""
        if not amount or value.amount is None:
            return self.quantity_class(value=value.canonical())
        if isinstance(value.amount, str):
            return self.quantity_class(value=value.canonical(), amount_kind=2)
        unscaled, scale = value.amount
        return self.quantity_class(value=value.canonical(), amount_kind=1, amount_value=unscaled, amount_scale=scale)

    def semver_message(self, value: semvers.Semver) -> Any:
        return self.semver_class(major=value.major, minor=value.minor, patch=value.patch, pre=value.prerelease())

    def is_quantity(self, message: Any) -> bool:
        return isinstance(message, self.quantity_class)

    def is_semver(self, message: Any) -> bool:
        return isinstance(message, self.semver_class)

    @staticmethod
    def quantity(message: Any) -> quantities.Quantity:
        amount: quantities.Amount | str | None = None
        if message.amount_kind == 1:
            amount = (message.amount_value, message.amount_scale)
        elif message.amount_kind == 2:
            amount = quantities.DEC
        return quantities.Quantity.from_canonical(message.value or "0", amount)

    @staticmethod
    def semver(message: Any) -> semvers.Semver:
        pre: tuple[int | str, ...] = ()
        if message.pre:
            pre = tuple(int(part) if part.isdigit() else part for part in message.pre.split("."))
        return semvers.Semver(message.major, message.minor, message.patch, pre)


def _device_file() -> Any:
    """``kubernetes.DRADevice`` for the checker: typed fields, attributes as Structs (map(string, dyn))."""
    struct = descriptor_pb2.FileDescriptorProto()
    struct_pb2.DESCRIPTOR.CopyToProto(struct)
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="fleet_kubernetes_dra_device.proto",
        package="kubernetes",
        syntax="proto3",
        dependency=[struct.name],
    )
    device = file.message_type.add(name="DRADevice")
    device.field.add(name="driver", json_name="driver", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    device.field.add(
        name="allowMultipleAllocations",
        json_name="allowMultipleAllocations",
        number=2,
        type=field.TYPE_BOOL,
        label=field.LABEL_OPTIONAL,
    )
    for number, name in ((3, "attributes"), (4, "capacity")):
        entry = device.nested_type.add(name=f"{name.capitalize()}Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
        entry.field.add(
            name="value",
            number=2,
            type=field.TYPE_MESSAGE,
            type_name=".google.protobuf.Struct",
            label=field.LABEL_OPTIONAL,
        )
        device.field.add(
            name=name,
            json_name=name,
            number=number,
            type=field.TYPE_MESSAGE,
            type_name=f".{DEVICE_TYPE}.{entry.name}",
            label=field.LABEL_REPEATED,
        )
    return struct, file


class NoSuchOverload(TypeError):
    """Raised by an implementation given a value of the wrong dynamic type (``dyn`` operands)."""

    def __init__(self, function: str) -> None:
        super().__init__(f"no such overload: {function}")


class SemverUnhashable(TypeError):
    """cel-go's panic, recovered, when its optimized ``in`` hashes a Semver (see rewrites.constant_memberships)."""


def _as_int64(number: int) -> int:
    return ((number + (1 << 63)) % (1 << 64)) - (1 << 63)


_RELATIONS = {"_<_": "less", "_<=_": "less_equals", "_>_": "greater", "_>=_": "greater_equals"}
_NUMBERS = ("int64", "uint64", "double")


def _relations() -> list[Any]:
    """``<``, ``<=``, ``>``, ``>=`` as cel-go declares them with cross-type numeric comparisons on."""
    T = cel.Type
    kinds = {
        "bool": T.BOOL,
        "int64": T.INT,
        "uint64": T.UINT,
        "double": T.DOUBLE,
        "string": T.STRING,
        "bytes": T.BYTES,
        "timestamp": T.TIMESTAMP,
        "duration": T.DURATION,
    }
    declarations = []
    for operator, stem in _RELATIONS.items():
        overloads = [cel.Overload(f"{stem}_{name}", T.BOOL, [kind, kind]) for name, kind in kinds.items()]
        overloads += [
            cel.Overload(f"{stem}_{left}_{right}", T.BOOL, [kinds[left], kinds[right]])
            for left in _NUMBERS
            for right in _NUMBERS
            if left != right
        ]
        declarations.append(cel.FunctionDecl(operator, overloads))
    return declarations


def _standard_library() -> Any:
    """The standard library without the relations, which :func:`_relations` declares."""
    excluded = "".join(f'    - name: "{operator}"\n' for operator in _RELATIONS)
    return cel.NewEnvConfigFromYaml(f"stdlib:\n  exclude_functions:\n{excluded}")


def _go_equal(types: Types, left: Any, right: Any) -> bool:
    """cel-go's ``types.Equal``: null first, then the left value's ``Equal``.

    Raises :class:`NoSuchOverload` where cel-go answers an error (a Quantity or
    Semver on the left, another type on the right). Inside lists and maps an
    element's error is skipped, as cel-go's ``baseList.Equal``/``baseMap.Equal``
    skip anything that is not ``false``.
    """
    if left is None or right is None:
        return left is None and right is None
    if types.is_quantity(left) or types.is_semver(left):
        if types.is_quantity(left) and types.is_quantity(right):
            return bool(left.value == right.value)  # the canonical value: the representation is no part of ==
        if type(left) is type(right):
            return bool(left == right)
        raise NoSuchOverload("_==_")
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        if isinstance(left, float) or isinstance(right, float):
            return float(left) == float(right)  # cel-go compares int/uint with double as doubles
        return bool(left == right)
    if isinstance(left, list | dict):
        if type(left) is not type(right) or len(left) != len(right):
            return False
        if isinstance(left, dict) and any(key not in right for key in left):
            return False
        pairs = zip(left, right, strict=True) if isinstance(left, list) else ((left[k], right[k]) for k in left)
        return all(_element_equal(types, a, b) for a, b in pairs)
    return type(left) is type(right) and bool(left == right)


def _contains(types: Types, items: list[Any], value: Any) -> bool:
    """cel-go's ``baseList.Contains``: ``value.Equal(item)`` for each item; errors count as not equal."""
    for item in items:
        try:
            if _go_equal(types, value, item):
                return True
        except NoSuchOverload:
            continue
    return False


def _element_equal(types: Types, left: Any, right: Any) -> bool:
    try:
        return _go_equal(types, left, right)
    except NoSuchOverload:
        return True  # not false: cel-go's list and map equality go on


def _equalities(types: Types) -> list[Any]:
    """``@kubernetes_equals``/``@kubernetes_not_equals``: ``==``/``!=`` as cel-go evaluates them.

    :mod:`fleet.cel.rewrites` points ``==``/``!=`` at them where a Quantity or
    Semver may meet another type; they answer as cel-go (:func:`_go_equal`): a
    version attribute compared with a string is a no-such-overload error.
    ``!=`` is "``==`` is not true", so an error there makes ``!=`` true
    (cel-go's ``evalNe``). Python implementations dispatch on
    the runtime kind of each argument (a ``dyn`` parameter never matches in
    cel-expr-python 0.1.3), so there is one overload per pair of kinds.
    """
    T = cel.Type
    q = T(QUANTITY_TYPE)

    def equals(left: Any, right: Any) -> bool:
        return _go_equal(types, left, right)

    def contains(value: Any, constants: list[Any]) -> bool:
        """cel-go's optimized ``x in [constants]``: a Go map lookup, which cannot hash a Semver."""
        if types.is_semver(value):
            raise SemverUnhashable("internal error: runtime error: hash of unhashable type cel.Semver")
        if value is None or isinstance(value, list | dict) or types.is_quantity(value):
            return False
        return any(_go_equal(types, value, constant) for constant in constants)

    def not_equals(left: Any, right: Any) -> bool:
        try:
            return not equals(left, right)
        except NoSuchOverload:
            return True

    kinds = {
        "bool": T.BOOL,
        "int": T.INT,
        "uint": T.UINT,
        "double": T.DOUBLE,
        "string": T.STRING,
        "bytes": T.BYTES,
        "null": T.NULL,
        "timestamp": T.TIMESTAMP,
        "duration": T.DURATION,
        "list": T.List(T.DYN),
        "map": T.Map(T.DYN, T.DYN),
        "message": q,
    }
    pairs = [(left, right) for left in kinds for right in kinds]
    return [
        cel.FunctionDecl(
            name,
            [
                cel.Overload(f"{name[1:]}_{left}_{right}", T.BOOL, [kinds[left], kinds[right]], impl=impl)
                for left, right in pairs
            ],
        )
        for name, impl in (("@kubernetes_equals", equals), ("@kubernetes_not_equals", not_equals))
    ] + [
        cel.FunctionDecl(
            "@kubernetes_in",
            [
                cel.Overload(
                    f"kubernetes_in_{kind}",
                    T.BOOL,
                    [kinds[kind], kinds["list"]],
                    impl=lambda value, items: _contains(types, items, value),
                )
                for kind in kinds
            ],
        ),
        cel.FunctionDecl(
            "@kubernetes_in_constants",
            [
                cel.Overload(f"kubernetes_in_constants_{kind}", T.BOOL, [kinds[kind], kinds["list"]], impl=contains)
                for kind in kinds
            ],
        ),
        cel.FunctionDecl(
            "@kubernetes_ordered", [cel.Overload("kubernetes_ordered_double", T.DOUBLE, [T.DOUBLE], impl=_ordered)]
        ),
    ]


def _ordered(number: float) -> float:
    """A ``double`` operand of ``<``/``>``..., refused when NaN as cel-go refuses it."""
    if math.isnan(number):
        raise ValueError("NaN values cannot be ordered")
    return number


def _functions(types: Types) -> list[Any]:
    T = cel.Type
    q, s = T(QUANTITY_TYPE), T(SEMVER_TYPE)

    def compare(name: str) -> Callable[[Any, Any], int]:
        def run(left: Any, right: Any) -> int:
            if types.is_quantity(left) and types.is_quantity(right):
                return types.quantity(left).compare(types.quantity(right))
            if types.is_semver(left) and types.is_semver(right):
                return types.semver(left).compare(types.semver(right))
            raise NoSuchOverload(name)

        return run

    order = compare("compareTo")

    def quantity_of(name: str, value: Any) -> quantities.Quantity:
        if not types.is_quantity(value):
            raise NoSuchOverload(name)
        return types.quantity(value)

    def semver_of(name: str, value: Any) -> semvers.Semver:
        if not types.is_semver(value):
            raise NoSuchOverload(name)
        return types.semver(value)

    def arithmetic(name: str) -> Callable[[Any, Any], Any]:
        def run(left: Any, right: Any) -> Any:
            base = quantity_of(name, left)
            other = quantities.Quantity.from_int(right) if isinstance(right, int) else quantity_of(name, right)
            result = base.add(other) if name == "add" else base.sub(other)
            return types.quantity_message(result, amount=True)  # known only if both operands' were

        return run

    def make_semver(text: str, normalize: bool = False) -> Any:
        parse = semvers.normalize_and_parse if normalize else semvers.parse_semver
        return types.semver_message(parse(text))

    def member(name: str, result: Any, *overloads: tuple[str, list[Any]], impl: Callable[..., Any]) -> Any:
        decls = [
            cel.Overload(overload_id, result, params, is_member=True, impl=impl if index == 0 else None)
            for index, (overload_id, params) in enumerate(overloads)
        ]
        return cel.FunctionDecl(name, decls)

    def global_(name: str, result: Any, overload_id: str, params: list[Any], impl: Callable[..., Any]) -> Any:
        return cel.FunctionDecl(name, [cel.Overload(overload_id, result, params, impl=impl)])

    return [
        global_(
            "quantity",
            q,
            "string_to_quantity",
            [T.STRING],
            lambda text: types.quantity_message(quantities.parse_quantity(text)),
        ),
        global_(
            "@quantity_amount",
            q,
            "string_to_quantity_amount",
            [T.STRING],
            lambda text: types.quantity_message(quantities.parse_quantity(text), amount=True),
        ),
        global_("isQuantity", T.BOOL, "is_quantity_string", [T.STRING], quantities.is_quantity),
        global_("sign", T.INT, "quantity_sign", [q], lambda v: quantity_of("sign", v).sign()),
        member(
            "isGreaterThan",
            T.BOOL,
            ("quantity_is_greater_than", [q, q]),
            ("semver_is_greater_than", [s, s]),
            impl=lambda a, b: order(a, b) == 1,
        ),
        member(
            "isLessThan",
            T.BOOL,
            ("quantity_is_less_than", [q, q]),
            ("semver_is_less_than", [s, s]),
            impl=lambda a, b: order(a, b) == -1,
        ),
        member("compareTo", T.INT, ("quantity_compare_to", [q, q]), ("semver_compare_to", [s, s]), impl=order),
        member(
            "asApproximateFloat",
            T.DOUBLE,
            ("quantity_get_float", [q]),
            impl=lambda v: quantity_of("asApproximateFloat", v).as_float(),
        ),
        member(
            "asInteger",
            T.INT,
            ("quantity_get_int", [q]),
            impl=lambda v: quantity_of("asInteger", v).as_integer(),
        ),
        member(
            "isInteger",
            T.BOOL,
            ("quantity_is_integer", [q]),
            impl=lambda v: quantity_of("isInteger", v).is_integer(),
        ),
        cel.FunctionDecl(
            "add",
            [
                cel.Overload("quantity_add", q, [q, q], is_member=True, impl=arithmetic("add")),
                cel.Overload("quantity_add_int", q, [q, T.INT], is_member=True, impl=arithmetic("add")),
            ],
        ),
        cel.FunctionDecl(
            "sub",
            [
                cel.Overload("quantity_sub", q, [q, q], is_member=True, impl=arithmetic("sub")),
                cel.Overload("quantity_sub_int", q, [q, T.INT], is_member=True, impl=arithmetic("sub")),
            ],
        ),
        cel.FunctionDecl(
            "semver",
            [
                cel.Overload("string_to_semver", s, [T.STRING], impl=make_semver),
                cel.Overload("string_bool_to_semver", s, [T.STRING, T.BOOL], impl=make_semver),
            ],
        ),
        cel.FunctionDecl(
            "isSemver",
            [
                cel.Overload("is_semver_string", T.BOOL, [T.STRING], impl=lambda text: semvers.is_semver(text)),
                cel.Overload(
                    "is_semver_string_bool",
                    T.BOOL,
                    [T.STRING, T.BOOL],
                    impl=lambda text, normalize: semvers.is_semver(text, normalize=normalize),
                ),
            ],
        ),
        member("major", T.INT, ("semver_major", [s]), impl=lambda v: _as_int64(semver_of("major", v).major)),
        member("minor", T.INT, ("semver_minor", [s]), impl=lambda v: _as_int64(semver_of("minor", v).minor)),
        member("patch", T.INT, ("semver_patch", [s]), impl=lambda v: _as_int64(semver_of("patch", v).patch)),
    ]


class Environment:
    """A compiled-once DRA environment: the cel-cpp runtime ``Env``, the typed checker, the value types."""

    def __init__(self) -> None:
        self.types = Types()
        T = cel.Type
        self.env = self._env({"device": T.Map(T.STRING, T.DYN)})
        self.checker = self._env(self._checked())

    @staticmethod
    def _checked() -> dict[str, Any]:
        T = cel.Type
        return {"device": T(DEVICE_TYPE), "device.capacity": T.Map(T.STRING, T.Map(T.STRING, T(QUANTITY_TYPE)))}

    @functools.cache  # noqa: B019 - one Environment per process (dra_environment), two keys
    def checker_with(self, variables: tuple[tuple[str, str], ...]) -> Any:
        """The checker with more typed variables, ``(name, "int" | "string")``: fleet.cel.standards."""
        kinds = {"int": cel.Type.INT, "string": cel.Type.STRING}
        return self._env(self._checked() | {name: kinds[kind] for name, kind in variables})

    def _env(self, variables: dict[str, Any]) -> Any:
        return cel.NewEnv(
            descriptor_pool=self.types.pool,
            config=_standard_library(),
            variables=variables,
            functions=_functions(self.types)
            + extensions.functions(contains=functools.partial(_contains, self.types))
            + _relations()
            + _equalities(self.types),
            extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_bindings.ExtBindings()],
        )


@functools.cache
def dra_environment() -> Environment:
    """The process-wide environment: immutable once built, and building it costs milliseconds."""
    return Environment()


__all__ = [
    "CAPACITY_AMOUNTS",
    "DEVICE_TYPE",
    "QUANTITY_TYPE",
    "SEMVER_TYPE",
    "Environment",
    "NoSuchOverload",
    "Types",
    "dra_environment",
]
