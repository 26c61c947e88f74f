"""The README's first command: `fleetctl demo` runs the whole flow on the sandbox and ends clean."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.sandbox import clusters

pytestmark = pytest.mark.sandbox


def test_demo_validates_diffs_applies_and_runs_a_gpu_pod(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    env = dict(os.environ, FLEET_SANDBOX_DIR=str(directory), NO_COLOR="1")
    try:
        run = subprocess.run([sys.executable, "-m", "fleetctl", "demo"], capture_output=True, text=True, env=env,
                             timeout=600, check=False)
        out = run.stdout
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "(validate: exit 0)" in out
        assert "(diff before apply: changes expected: exit 1)" in out
        assert "(apply: exit 0)" in out
        assert "(diff after apply: nothing left: exit 0)" in out
        assert "allocated,reserved" in out
        assert "claim gpu-pod-gpu-" in out and "gpu.nvidia.com pool h" in out
        # The operator stage installed the stand-in GPU Operator from the loopback chart repository.
        assert "serving the stand-in gpu-operator chart at http://127.0.0.1:" in out
        assert "operator: 1 created" in run.stderr
    finally:
        clusters.down(directory=directory)
