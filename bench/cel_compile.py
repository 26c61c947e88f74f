"""Benchmark: compile the distinct selector expressions of bench/validate.py (914), best of 5, CPU.

Compiling is type-checking with cel-cpp plus what fleet adds to agree with the
API server (docs/cel.md: the checked AST's literal check, the runtime rewrites).
Not a timed test; run it by hand and compare commits on the same machine:

    .venv/bin/python bench/cel_compile.py
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import validate
from fleet.cel import SelectorCompileError, selectors


def main() -> None:
    rng = random.Random(7)
    templates = [validate.template(rng, n) for n in range(10_000)]
    expressions = sorted(
        {
            s["cel"]["expression"]
            for t in templates
            for r in t["spec"]["spec"]["devices"]["requests"]
            for a in (r.get("firstAvailable") or [r.get("exactly")])
            for s in a.get("selectors") or []
        }
    )
    selectors.compile_selector("true")  # the environment, built once per process
    best = float("inf")
    for _ in range(5):
        selectors.compile_selector.cache_clear()
        started = time.process_time()
        for expression in expressions:
            with contextlib.suppress(SelectorCompileError):
                selectors.compile_selector(expression)
        best = min(best, time.process_time() - started)
    each = best / len(expressions) * 1e6
    print(f"{len(expressions)} distinct expressions compiled in {best:.3f} s CPU (best of 5), {each:.0f} us each")
    print(f"RESULT expressions={len(expressions)} compile_cpu_s={best:.3f} per_expression_us={each:.0f}")


if __name__ == "__main__":
    main()
