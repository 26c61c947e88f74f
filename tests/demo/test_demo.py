"""The README's first command: `fleetctl demo` runs the controller flow on the sandbox and its Gitea;
`sandbox down` ends it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from fleet.sandbox import clusters, processes

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extras("gitea")]


def test_demo_applies_with_the_controller_merges_a_pr_rejects_a_bad_commit_and_runs_a_gpu_pod(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    env = dict(os.environ, FLEET_SANDBOX_DIR=str(directory), NO_COLOR="1")
    try:
        run = subprocess.run([sys.executable, "-m", "fleetctl", "demo"], capture_output=True, text=True, env=env,
                             timeout=900, check=False)  # fmt: skip
        out = run.stdout
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "(validate: exit 0)" in out
        assert "(diff before apply: changes expected: exit 1)" in out
        assert "fleetsync.fleet.gpufleet.dev/gpu-east condition met" in out
        assert "(diff after the controller applied: nothing left: exit 0)" in out
        assert re.search(r"pull request #1: http://127\.0\.0\.1:\d+/fleet/fleet/pulls/1", out)
        assert re.search(r"comment \d+ updated in place \(1 comment on the pull request\)", out)
        assert re.search(r"ml-research/two-h100 applied \d+\.\d s after the merge", out)
        assert len(re.findall(r"fleet/gpu-east: success — applied \d+ objects", out)) == 2
        assert re.search(r"fleet/gpu-east: failure — teams/inference/passthrough\.yaml:\d+:\d+ ", out), out[-3000:]
        assert re.search(r"teams/inference/passthrough\.yaml:\d+:\d+ \S+", out), out[-3000:]
        assert "cluster unchanged (every managed object's resourceVersion): yes" in out
        assert "allocated,reserved" in out
        assert "claim gpu-pod-gpu-" in out and "gpu.nvidia.com pool h" in out
        console = re.search(r"open (http://127\.0\.0\.1:\d+/ui)/ and log in through Gitea:", out)
        assert console, out[-3000:]
        assert re.search(r"as the admin: +fleet / \S+ +\(group fleet-admins", out)
        assert re.search(r"as a team member: +alice / \S+ +\(group ml-research-admins\)", out)
        page = httpx.get(f"{console[1]}/", timeout=30)
        assert page.status_code == 401 and "/ui/login" in page.text, "the console asks to log in"
        assert httpx.get(f"{console[1]}/login", timeout=30).headers["location"].startswith("http://127.0.0.1:")
        sb = clusters.Sandbox.load(directory)
        assert sb is not None and [c.name for c in sb.attached] == ["fleet-controller"]
        (forge,) = [c for c in sb.components if c.name == "gitea"]
        controller = sb.attached[0]
        assert processes.alive(controller) and processes.alive(forge)
        assert clusters.down(directory=directory)
        assert not processes.alive(forge) and not processes.group_members(forge.pid)
        assert not processes.alive(controller) and not processes.group_members(controller.pid)
    finally:
        clusters.down(directory=directory)
