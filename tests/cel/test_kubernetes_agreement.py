"""fleet.cel answers every case of the corpus as Kubernetes' own Go code answered it.

The golden answers come from k8s.io/dynamic-resource-allocation v0.37.2
(``CompileCELExpression`` as the API server checks a new selector, + ``DeviceMatches``),
see tests/cel/oracle. Outcomes
compared: compiles or not — and where: the first error's line and column — then
true / false / runtime error.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from fleet.cel import Device, SelectorCompileError, SelectorRuntimeError, compile_selector

sys.path.insert(0, str(Path(__file__).parent / "oracle"))
import cases

DEVICES = cases.devices()
GOLDEN = cases.load_golden()

# Known, documented differences (docs/cel.md "Differences from Kubernetes"), each a strict xfail.
DIFFERENCES: dict[str, str] = {
    "[quantity('1000m')].all(q, optional.of(q) == optional.of(quantity('1')) && !q.isInteger())": (
        "a comprehension element that the loop also wraps in an optional keeps its plain value (optional values "
        "cannot reach a Python implementation in cel-expr-python 0.1.3, so == on them stays cel-cpp's, field by "
        "field), and isInteger() answers from the value"
    ),
}


_POSITION = re.compile(r"<input>:(\d+):(\d+):")


def outcome(expr: str, name: str) -> tuple[str, Any]:
    driver, raw = DEVICES[name]
    try:
        selector = compile_selector(expr)
    except SelectorCompileError as err:
        return "compile_error", (err.issues[0].line, err.issues[0].column)
    try:
        return "result", selector.evaluate(Device.from_slice(driver=driver, device=raw))
    except SelectorRuntimeError as err:
        return "error", err.what


def expected(record: dict[str, Any]) -> tuple[str, Any]:
    for kind in ("compile_error", "error"):
        if kind in record:
            return kind, record[kind]
    return "result", record["result"]


def test_golden_covers_the_corpus() -> None:
    assert [(r["expr"], r["device"]) for r in GOLDEN] == [(e, d) for e, d, _ in cases.all_cases()]


def differs(record: dict[str, Any]) -> bool:
    """A documented difference; the 'big' capacity exists on the 'odd' device only."""
    return record["expr"] in DIFFERENCES and ("'big'" not in record["expr"] or record["device"] == "odd")


PARAMS = [
    pytest.param(
        r,
        id=f"{r['device']}:{r['expr'][:60]}",
        marks=[pytest.mark.xfail(strict=True, reason=DIFFERENCES[r["expr"]])] if differs(r) else [],
    )
    for r in GOLDEN
]


@pytest.mark.parametrize("record", PARAMS)
def test_same_outcome_as_kubernetes(record: dict[str, Any]) -> None:
    kind, value = outcome(record["expr"], record["device"])
    want_kind, want_value = expected(record)
    assert kind == want_kind, f"kubernetes: {want_kind} {want_value!r}; fleet: {kind} {value!r}"
    if kind == "compile_error":
        where = _POSITION.search(want_value)
        if where:  # the first error, at the same line and column as the API server's
            assert value == (int(where.group(1)), int(where.group(2))), f"kubernetes: {want_value}"
    if kind == "result":
        assert value == want_value
    if kind == "error" and "no such key" in want_value:
        assert want_value.split("no such key: ")[1].split()[0].strip("\"'") in value
