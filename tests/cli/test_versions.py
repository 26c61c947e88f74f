"""``fleetctl --version`` and ``fleet-controller --version``: fleet's version and git commit, and the
Kubernetes, helm and chart versions it is tested with, as the installed programs print them."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fleet import builds
from fleet.sandbox import charts, versions

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def head() -> str:
    found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    return found.stdout.strip()


@pytest.mark.parametrize("program", ["fleetctl", "fleet-controller"])
def test_version_names_fleet_its_commit_and_what_it_is_tested_with(program: str) -> None:
    argv = [str(BIN / program), "--version"]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run.stdout.splitlines() == [
        f"{program} {version}",
        f"git commit: {head()}",
        f"tested with: Kubernetes {versions.KUBERNETES}, helm {versions.HELM}, "
        f"NVIDIA gpu-operator chart {versions.GPU_OPERATOR}",
    ]


def test_the_chart_version_is_the_vendored_one() -> None:
    readme = (ROOT / "tests" / "data" / "gpu-operator" / "README.md").read_text()
    assert readme.startswith(f"# NVIDIA GPU Operator {versions.GPU_OPERATOR} (vendored)\n")
    assert charts.RELEASED == versions.GPU_OPERATOR


def test_an_image_takes_its_commit_from_the_build_file(tmp_path: Path) -> None:
    build_file = tmp_path / "build.json"
    # What the Dockerfile's build stage runs (tests/install/test_dockerfile.py checks it is this line).
    subprocess.run(
        ["sh", "-c", f'printf \'{{"revision": "%s"}}\\n\' "$REVISION" > {build_file}'],
        env={"REVISION": "0123abc", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert json.loads(build_file.read_text()) == {"revision": "0123abc"}
    assert builds._revision(build_file=build_file, checkout=tmp_path) == "0123abc"
    # A checkout without the file asks git; neither is "unknown".
    assert builds._revision(build_file=tmp_path / "absent.json", checkout=ROOT) == head()
    assert builds._revision(build_file=tmp_path / "absent.json", checkout=tmp_path) == "unknown"
