"""fleet's prediction against what the real scheduler did with the real H100's slice.

The real scheduler allocated ``gpu-0`` of pool ``gpu-real-01`` for a claim from
``ml-research/h100-gpu``. fleet, given the same slice and the DeviceClass as the API
server stored it, must predict that allocation, and answer for the example fleet's
other templates what the scheduler would: which fit and, for the two that do not, why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.inventory import Checker, Inventory, snapshots
from fleet.inventory.matches import Matcher
from fleet.inventory.requests import read_claim
from tests.realgpu import capture
from tests.validate.test_cli import fleetctl


@pytest.fixture(scope="module")
def checker() -> Checker:
    return Checker(
        inventory=Inventory.from_slices(capture.slices()), classes={"gpu.nvidia.com": capture.device_class()}
    )


def allocated() -> set[str]:
    results = capture.claim()["status"]["allocation"]["devices"]["results"]
    return {f"{r['driver']}/{r['pool']}/{r['device']}" for r in results}


def test_the_claim_is_fleets_template_as_rendered() -> None:
    """What the scheduler allocated for is fleet's template: the claim's spec is the template's."""
    rendered = capture.example("ml-research", "h100-gpu")["spec"]["spec"]
    stored = capture.template()["spec"]["spec"]
    assert (
        stored["devices"]["requests"][0]["exactly"]["selectors"]
        == rendered["devices"]["requests"][0]["exactly"]["selectors"]
    )
    assert capture.claim()["spec"] == stored


def test_h100_gpu_is_predicted_on_the_device_the_scheduler_chose(checker: Checker) -> None:
    report = checker.check_template(capture.template())
    assert (report.satisfiable, report.nodes, report.devices, report.capacity) == (True, 1, 1, 1)
    shape, findings = read_claim(capture.claim()["spec"])
    assert findings == []
    [[alternative]] = shape.requests
    inventory = checker.inventory
    match = Matcher(inventory=inventory, classes={"gpu.nvidia.com": capture.device_class()}).match(alternative)
    assert {inventory.devices[i].id for i in match.matching} == allocated() == {"gpu.nvidia.com/gpu-real-01/gpu-0"}


@pytest.mark.parametrize(
    ("team", "name", "alternatives"),
    [
        ("ml-research", "h100-gpu", [("gpu", 1, 1)]),
        ("ml-research", "single-gpu", [("gpu", 1, 1)]),
        ("ml-research", "large-memory-gpu", [("gpu", 1, 1)]),
        ("inference", "single-gpu", [("gpu", 1, 1)]),
        ("inference", "h200-or-h100", [("gpu/h200", 0, 0), ("gpu/h100", 1, 1)]),
    ],
)
def test_templates_that_fit_the_real_h100(
    checker: Checker, team: str, name: str, alternatives: list[tuple[str, int, int]]
) -> None:
    report = checker.check_template(capture.example(team, name))
    assert (report.satisfiable, report.nodes, report.capacity) == (True, 1, 1)
    assert report.findings == ()
    assert [(a.name, a.devices, a.nodes) for request in report.requests for a in request] == alternatives


def test_two_gpus_does_not_fit_one_gpu(checker: Checker) -> None:
    report = checker.check_template(capture.example("ml-research", "two-gpus"))
    assert not report.satisfiable
    [finding] = report.findings
    assert finding.rule == "claim-unsatisfiable"
    assert finding.message == "request 'gpus' needs 2 devices on one node; at most 1 match on any node (gpu-real-01)"


def test_hopper_large_memory_does_not_fit_an_80gb_h100(checker: Checker) -> None:
    """The real H100 publishes 81559Mi, which is not greater than 80Gi (81920Mi)."""
    assert capture.device()["capacity"]["memory"] == {"value": "81559Mi"}
    report = checker.check_template(capture.example("inference", "hopper-large-memory"))
    assert not report.satisfiable
    [finding] = report.findings
    assert finding.rule == "claim-unsatisfiable"
    assert 'memory.isGreaterThan(quantity("80Gi"))` excludes every device' in finding.message
    assert finding.hint == "memory = 81559Mi (1)"


def test_validate_on_a_snapshot_of_the_real_slice(tmp_path: Path) -> None:
    """The CLI a pull request runs: ``fleetctl validate --inventory`` on the real slice."""
    path = tmp_path / "real-gpu.yaml"
    path.write_text(snapshots.dump(snapshots.snapshot(slices=capture.slices(), cluster="gpu-east")))
    result = fleetctl("validate", str(capture.EXAMPLE_FLEET), "--inventory", str(path), "-o", "json")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    rows = [row for row in document["satisfaction"] if row["cluster"] == "gpu-east"]
    fits = {row["object"].partition("/")[2]: row["nodes"] for row in rows}
    assert fits == {
        "ml-research/h100-gpu": 1,
        "ml-research/single-gpu": 1,
        "ml-research/large-memory-gpu": 1,
        "ml-research/two-gpus": 0,
        "inference/single-gpu": 1,
        "inference-canary/h200-or-h100": 1,
        "inference/hopper-large-memory": 0,
    }
    unsatisfiable = sorted(Path(f["file"]).name for f in document["findings"] if f["rule"] == "claim-unsatisfiable")
    assert unsatisfiable == ["hopper-large-memory.yaml", "two-gpus.yaml"]
