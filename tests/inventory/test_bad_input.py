"""Bad DRA input is a finding with file:line and a hint, never a crash (pure: no cluster).

Slices come from an inventory snapshot (``fleetctl validate --inventory FILE``): a counter no
counter set has, a consumption beyond the set's value, and the API's limits (8 counter sets
per slice, 2 consumesCounters entries per device) are reported at their line in the file.
Claims are checked where they are written: a capacity request the device's requestPolicy
refuses, a toleration with an unknown effect, more than 16 tolerations.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from fleet.inventory import Checker, Inventory, limits, models, snapshots
from fleet.sandbox import gpus
from tests.inventory.conftest import CLASSES, GPU, claim, request

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet"


def dynamic_slices() -> list[dict[str, Any]]:
    node = models.NodeSpec(
        name="dyn-01", ordinal=1, pool="dyn", model=models.MODELS["h100"], gpus=1, mig_strategy="dynamic"
    )
    return gpus.slice_manifests(node, node_uid="uid")


def snapshot_text(slices: list[dict[str, Any]]) -> str:
    return snapshots.dump(snapshots.snapshot(slices=slices, cluster="gpu-east"))


def line_of(text: str, needle: str, after: str = "") -> int:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if after in line) if after else 0
    return next(i for i in range(start, len(lines)) if needle in lines[i]) + 1


def test_a_counter_no_counter_set_has() -> None:
    slices = dynamic_slices()
    device = slices[1]["spec"]["devices"][1]  # gpu-0-mig-1g10gb-19-0
    device["consumesCounters"][0]["counters"]["memory-slice-9"] = {"value": "1"}
    text = snapshot_text(slices)
    [(line, _, problem)] = snapshots.problems(text)
    assert problem.rule == "counter-unknown"
    assert "memory-slice-9" in problem.message and "whole pool as invalid" in problem.message
    assert "memory-slice-0" in problem.hint
    assert line == line_of(text, "memory-slice-9")
    inventory = Inventory.from_slices(slices)
    assert any("invalid" in note for note in inventory.notes)  # fleetctl inventory says so, exit 1
    assert Checker(inventory=inventory, classes=CLASSES).check_claim(claim(request())).capacity == 0


def test_a_consumption_beyond_the_counter_set() -> None:
    slices = dynamic_slices()
    device = slices[1]["spec"]["devices"][1]
    device["consumesCounters"][0]["counters"]["multiprocessors"] = {"value": "200"}
    text = snapshot_text(slices)
    [(line, _, problem)] = snapshots.problems(text)
    assert problem.rule == "counter-exceeded"
    assert "200 of counter multiprocessors" in problem.message and "(132)" in problem.message
    assert line == line_of(text, "value: '200'")
    checker = Checker(inventory=Inventory.from_slices(slices), classes=CLASSES)
    one = f"{GPU}.profile == '1g.10gb'"
    assert checker.check_claim(claim(request("mig", one, device_class="mig.nvidia.com"))).capacity == 6


def test_the_api_limits_of_slices() -> None:
    slices = dynamic_slices()
    counter_set = slices[0]["spec"]["sharedCounters"][0]
    slices[0]["spec"]["sharedCounters"] = [
        dict(copy.deepcopy(counter_set), name=f"gpu-{i}-counter-set") for i in range(limits.MAX_COUNTER_SETS + 1)
    ]
    device = slices[1]["spec"]["devices"][0]
    device["consumesCounters"] = [
        {"counterSet": f"gpu-{i}-counter-set", "counters": {"memory": {"value": "1Mi"}}} for i in range(3)
    ]
    text = snapshot_text(slices)
    found = {problem.rule: (problem, line) for line, _, problem in snapshots.problems(text)}
    assert set(found) == {"slice-limit"} and len(snapshots.problems(text)) == 2
    messages = sorted(p.message for _, _, p in snapshots.problems(text))
    assert messages == [
        "9 counter sets in one slice; the API allows 8",
        "device gpu-0 has 3 consumesCounters entries; the API allows 2",
    ]


def test_validate_reports_the_snapshot_line(tmp_path: Path) -> None:
    slices = dynamic_slices()
    slices[1]["spec"]["devices"][2]["consumesCounters"][0]["counterSet"] = "gpu-7-counter-set"
    path = tmp_path / "inventory.yaml"
    path.write_text(snapshot_text(slices))
    done = subprocess.run(
        [sys.executable, "-m", "fleetctl", "validate", str(EXAMPLE), "--inventory", str(path), "--cluster", "gpu-east"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    expected = f"{path}:{line_of(path.read_text(), 'counterSet: gpu-7-counter-set')}"
    assert expected in done.stdout
    assert "counter-unknown" in done.stdout and "gpu-7-counter-set" in done.stdout


def test_a_capacity_request_outside_the_request_policy() -> None:
    node = models.NodeSpec(
        name="shared-01", ordinal=1, pool="shared", model=models.MODELS["h100"], gpus=2, consumable_shares="memory"
    )
    checker = Checker(inventory=Inventory.from_slices(gpus.slice_manifests(node, node_uid="u")), classes=CLASSES)
    report = checker.check_claim(claim(request("gpu", capacity={"requests": {"memory": "100Gi"}})))
    assert not report.satisfiable
    [finding] = report.findings
    assert finding.rule == "claim-unsatisfiable" and finding.request_index == 0
    assert "memory 100Gi is outside the device's requestPolicy (default 81559Mi, 1Mi..81559Mi step 1Mi)" in (
        finding.message
    )
    assert "requestPolicy" in finding.hint
    missing = checker.check_claim(claim(request("gpu", capacity={"requests": {"cores": "1"}})))
    assert "the device has no capacity 'cores'" in missing.findings[0].message
    broken = checker.check_claim(claim(request("gpu", capacity={"requests": {"memory": "lots"}})))
    assert [f.rule for f in broken.findings] == ["claim-invalid"]


def test_tolerations_the_api_refuses() -> None:
    checker = Checker(inventory=Inventory.from_slices(dynamic_slices()), classes=CLASSES)
    wrong = request("gpu", tolerations=[{"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "NoScheduel"}])
    [finding] = [f for f in checker.check_claim(claim(wrong)).findings if f.rule == "claim-invalid"]
    assert "effect 'NoScheduel'" in finding.message and "NoSchedule or NoExecute" in finding.hint
    assert finding.request_index == 0
    many = request("gpu", tolerations=[{"key": f"k{i}", "operator": "Exists"} for i in range(17)])
    [finding] = [f for f in checker.check_claim(claim(many)).findings if f.rule == "claim-invalid"]
    assert "17 tolerations; the API allows 16" in finding.message


def test_findings_serialise() -> None:
    """A snapshot's problems are plain data: JSON carries each one whole."""
    slices = dynamic_slices()
    slices[1]["spec"]["devices"][1]["consumesCounters"][0]["counters"]["memory-slice-9"] = {"value": "1"}
    found = [problem.__dict__ for _, _, problem in snapshots.problems(snapshot_text(slices))]
    assert [p["rule"] for p in found] == ["counter-unknown"]
    assert json.loads(json.dumps(found)) == [{**p, "path": list(p["path"])} for p in found]
