"""Bad change-management input: ``fleetctl validate`` names each with file:line and a hint (issue 28 §5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.manifests.repos import EXAMPLE
from tests.validate.test_cli import fleetctl

CLUSTER = """\
  maintenance:
    windows:
    - schedule: "0 0 30 2 *"
      duration: 4h
    - schedule: "0 2 * * 6"
      duration: 0m
      timeZone: Europe/Berlln
    - schedule: "0 3 * * 0"
      duration: -2h
  disruption:
    policy: drain
    maxUnavailable: 0
"""
FLEET = """\
  rollout:
    waves:
    - [gpu-west, gpu-north]
    - [gpu-east, gpu-west]
    bake: 0s
"""
GOOD_CLUSTER = """\
  maintenance:
    windows:
    - schedule: "0 2 * * 6"
      duration: 4h
      timeZone: Europe/Berlin
  disruption:
    policy: drain
    maxUnavailable: 2
    deadline: 6h
"""
GOOD_FLEET = """\
  rollout:
    waves: [[gpu-west], [gpu-east]]
    bake: 30m
"""


def repo_with(tmp_path: Path, *, cluster: str, fleet: str) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    with (repo / "clusters" / "gpu-east.yaml").open("a") as f:
        f.write(cluster)
    with (repo / "fleet.yaml").open("a") as f:
        f.write(fleet)
    return repo


def test_each_bad_window_wave_and_policy_is_a_finding_at_its_line(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, cluster=CLUSTER, fleet=FLEET)
    done = fleetctl("validate", str(repo), "-o", "json")
    assert done.returncode == 1, done.stderr
    found = {
        (str(Path(f["file"]).relative_to(repo)), f["line"], f["message"].split(": ", 1)[-1]): f["hint"]
        for f in json.loads(done.stdout)["findings"]
    }
    east, root = "clusters/gpu-east.yaml", "fleet.yaml"
    expected = {
        (east, 14, "schedule '0 0 30 2 *' never opens (no start in the next 5 years)"): "30 February",
        (east, 17, "duration '0m' is zero"): "longer than zero",
        (east, 18, "unknown time zone 'Europe/Berlln'"): "IANA zone name",
        (east, 20, "duration '-2h' is negative"): "longer than zero",
        (east, 23, "drain with maxUnavailable: 0 never drains a node"): "maxUnavailable: 1 or more",
        (root, 15, "wave 1 names cluster 'gpu-north', which the Fleet does not list"): "gpu-east, gpu-west",
        (root, 16, "cluster 'gpu-west' is in wave 1 and again in wave 2"): "one wave only",
        (root, 17, "bake '0s' is zero"): "longer than zero",
    }
    for key, hint in expected.items():
        assert key in found, f"{key} not among {sorted(found)}"
        assert hint in found[key]
    assert len(found) == len(expected), sorted(set(found) - set(expected))


def test_the_text_output_says_file_line_and_hint(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, cluster=CLUSTER, fleet=FLEET)
    done = fleetctl("validate", str(repo))
    assert done.returncode == 1
    assert "clusters/gpu-east.yaml:18:" in done.stdout + done.stderr
    assert "hint: use an IANA zone name" in done.stdout + done.stderr


def test_good_windows_waves_and_policies_validate(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, cluster=GOOD_CLUSTER, fleet=GOOD_FLEET)
    done = fleetctl("validate", str(repo))
    assert done.returncode == 0, done.stdout + done.stderr
