"""``fleetctl validate`` as CI runs it: output formats, exit codes, whole-revision reports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fleetctl import cli
from tests.manifests.repos import EXAMPLE, ROOT


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    shutil.copytree(EXAMPLE, target)
    return target


def fleetctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetctl", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )


def break_it(repo: Path) -> None:
    template = repo / "teams" / "ml-research" / "two-gpus.yaml"
    template.write_text(
        template.read_text()
        .replace("namespace: ml-research", "namespace: inference")
        .replace("deviceClassName", "devicClassName", 0)
    )
    single = repo / "teams" / "inference" / "single-gpu.yaml"
    single.write_text(single.read_text().replace("deviceClassName: gpu.nvidia.com", "devicClassName: gpu.nvidia.com"))
    (repo / "teams" / "ml-research" / "role.yaml").write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\n"
    )


def test_example_is_clean_exit_0() -> None:
    result = fleetctl("validate", "examples/fleet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("0 error(s), 0 warning(s) in 22 objects")


def test_findings_exit_1_text_format_reports_the_whole_revision(repo: Path) -> None:
    break_it(repo)
    result = fleetctl("validate", str(repo), env={"NO_COLOR": "1"})
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert (
        f"{repo}/teams/inference/single-gpu.yaml:13:13 schema unknown field "
        "'spec.spec.devices.requests[0].exactly.devicClassName'" in lines
    )
    assert "  hint: did you mean 'deviceClassName'?" in lines
    assert any(line.startswith(f"{repo}/teams/ml-research/role.yaml:1:1 team-cluster-scoped") for line in lines)
    assert any(" team-namespace team 'ml-research' cannot write into namespace 'inference'" in line for line in lines)
    assert lines[-1].startswith("3 error(s), 0 warning(s)")
    assert "\033[" not in result.stdout


def test_relative_paths_are_shown_from_the_working_directory() -> None:
    result = fleetctl("validate", "examples/fleet", "-o", "json")
    assert json.loads(result.stdout)["summary"] == {"errors": 0, "warnings": 0, "objects": 22}


def test_json_output(repo: Path) -> None:
    break_it(repo)
    result = fleetctl("validate", str(repo), "-o", "json")
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["summary"]["errors"] == 3
    first = document["findings"][0]
    assert set(first) == {"file", "line", "col", "rule", "severity", "message", "hint", "object", "cluster"}
    assert {f["rule"] for f in document["findings"]} == {"schema", "team-cluster-scoped", "team-namespace"}


def test_github_annotations(repo: Path) -> None:
    break_it(repo)
    result = fleetctl("validate", str(repo), "-o", "github")
    assert result.returncode == 1
    line = next(x for x in result.stdout.splitlines() if "title=schema" in x)
    assert line.startswith(f"::error file={repo}/teams/inference/single-gpu.yaml,line=13,col=13,title=schema::")
    assert line.endswith("%0Ahint: did you mean 'deviceClassName'?")


def test_cluster_option_and_unknown_cluster_exit_2(repo: Path) -> None:
    overlay = repo / "overlays" / "gpu-west" / "overlay.yaml"
    overlay.write_text(overlay.read_text().replace("nodes: 2", "nodes: -2"))
    east = fleetctl("validate", str(repo), "--cluster", "gpu-east")
    assert east.returncode == 0, east.stdout
    west = fleetctl("validate", str(repo), "--cluster", "gpu-west")
    assert west.returncode == 1
    assert "[cluster gpu-west]" not in west.stdout  # the only cluster checked: holds for all checked
    assert "overlays/gpu-west/overlay.yaml:18:9 schema spec.nodes" in west.stdout
    cluster = repo / "clusters" / "gpu-west.yaml"
    cluster.write_text(cluster.read_text().replace("kubernetesVersion", "kubernetesVersio"))
    broken = fleetctl("validate", str(repo), "--cluster", "gpu-west")
    assert broken.returncode == 1  # the Cluster's own file is the finding, not a usage error
    assert "clusters/gpu-west.yaml:10:3 schema unknown field 'spec.kubernetesVersio'" in broken.stdout
    # no cascade, and the Cluster is still resolved (salvaged), so the overlay's own finding stays
    assert "overlays/gpu-west/overlay.yaml:18:9 schema spec.nodes" in broken.stdout
    assert broken.stdout.splitlines()[-1].startswith("2 error(s), 0 warning(s)")
    nope = fleetctl("validate", str(repo), "--cluster", "nope")
    assert nope.returncode == 2
    assert "no Cluster named 'nope'" in nope.stderr


def test_warnings_alone_exit_0(repo: Path) -> None:
    team = repo / "teams" / "inference" / "team.yaml"
    team.write_text(team.read_text().replace("env: prod", "env: production"))
    result = fleetctl("validate", str(repo), env={"NO_COLOR": "1"})
    assert result.returncode == 0, result.stdout
    assert "cluster-reference warning: Team 'inference' selects no cluster" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("0 error(s), 1 warning(s)")
    github = fleetctl("validate", str(repo), "-o", "github")
    assert github.stdout.startswith("::warning file=")


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert cli.run(["validate", "-o", "xml"]) == 2
    assert cli.run(["validate", str(tmp_path / "missing")]) == 2
    assert cli.run(["validate", "--inventory", "a", "--context", "b"]) == 2


def test_colour_only_on_a_tty(repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    break_it(repo)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cli.run(["validate", str(repo)]) == 1
    assert re.search(r"\033\[[0-9;]*31m", capsys.readouterr().out), "rule ids in red (rich may join bold and red)"
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli.run(["validate", str(repo)]) == 1
    assert "\033[" not in capsys.readouterr().out


def test_pre_commit_hook_runs_the_installed_command() -> None:
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "fleetctl-validate"
    assert hook["entry"] == "fleetctl validate"
    assert hook["pass_filenames"] is False
    assert 'fleetctl = "fleetctl.__main__:main"' in (ROOT / "pyproject.toml").read_text()


def test_default_repo_is_the_working_directory(repo: Path) -> None:
    break_it(repo)
    result = subprocess.run(
        [sys.executable, "-m", "fleetctl", "validate", "-o", "github"],
        capture_output=True,
        text=True,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "::error file=teams/inference/single-gpu.yaml,line=13,col=13,title=schema::" in result.stdout
