"""Rebuild golden.jsonl by asking Kubernetes' own DRA CEL code (Go) about every case.

    python tests/cel/oracle/regenerate.py

Builds main.go against the module versions tools/ktestenv pins for Kubernetes
``KUBERNETES`` (v1.37.2, whose CEL fleet.cel follows, as the API server checks a
new selector) from the local Go module cache, offline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from fleet.sandbox import releases

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import cases  # noqa: E402

KUBERNETES = "1.37"
"""The release whose DRA CEL the golden answers come from (k8s.io/dynamic-resource-allocation v0.37.2)."""


def build(workdir: Path) -> Path:
    modfile = HERE.parents[2] / "tools" / "ktestenv" / releases.select(KUBERNETES).modfile
    shutil.copy(modfile, workdir / "go.mod")
    shutil.copy(modfile.with_suffix(".sum"), workdir / "go.sum")
    shutil.copy(HERE / "main.go", workdir / "main.go")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOSUMDB": "off"}
    subprocess.run(["go", "build", "-o", "oracle", "."], cwd=workdir, env=env, check=True)
    return workdir / "oracle"


def main() -> None:
    devices = cases.devices()
    lines = []
    for expr, name, group in cases.all_cases():
        driver, device = devices[name]
        lines.append(json.dumps({"expr": expr, "driver": driver, "device": device, "name": name, "group": group}))
    with tempfile.TemporaryDirectory() as tmp:
        oracle = build(Path(tmp))
        out = subprocess.run(
            [str(oracle)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True
        ).stdout.splitlines()
    with cases.GOLDEN.open("w") as golden:
        for line, answer in zip(lines, out, strict=True):
            case = json.loads(line)
            record = {"expr": case["expr"], "device": case["name"], "group": case["group"], **json.loads(answer)}
            record["expr"] = case["expr"]
            golden.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {len(out)} answers to {cases.GOLDEN}")


if __name__ == "__main__":
    main()
