"""A GPUNodePool with ``mig: {strategy: dynamic}``: validate without a cluster counts MIG copies by counters.

The declared devices are what the NVIDIA driver's DynamicMIG publishes for the pool's model
(every placement, a counter set per GPU), so a MIG template's copies are the placements that
fit together — 7 one-slice instances per H100 — not one per published placement.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from fleet.inventory import Checker
from fleet.manifests import read_revision
from fleet.manifests.views import resolve
from fleet.policy import declarations, validate
from tests.inventory.conftest import CLASSES, GPU, claim, request
from tests.manifests.repos import EXAMPLE


def dynamic_repo(tmp_path: Path, mig: str = "  mig:\n    strategy: dynamic\n") -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    pool = repo / "pools" / "h100.yaml"
    pool.write_text(pool.read_text() + mig)
    return repo


def test_declared_dynamic_pool_counts_placements_by_counters(tmp_path: Path) -> None:
    revision = read_revision(dynamic_repo(tmp_path))
    view = resolve(revision, cluster="gpu-east")
    found = declarations.declared(view)
    assert found.inventory is not None and not found.findings
    h100 = next(m for m in view.pools if m.name == "h100")
    nodes = h100.data["spec"]["nodes"]
    checker = Checker(inventory=found.inventory, classes=CLASSES)
    one = request("mig", f"{GPU}.profile == '1g.10gb'", device_class="mig.nvidia.com")
    assert checker.check_claim(claim(one)).capacity == nodes * 8 * 7
    assert not [f for f in validate(revision).findings if f.severity == "error"]


def test_static_profiles_and_dynamic_strategy_do_not_mix(tmp_path: Path) -> None:
    repo = dynamic_repo(tmp_path, "  mig:\n    strategy: dynamic\n    profiles: {1g.10gb: 7}\n")
    findings = [f for f in validate(read_revision(repo)).findings if f.location.file == "pools/h100.yaml"]
    assert any("leave profiles out" in f.message for f in findings)
