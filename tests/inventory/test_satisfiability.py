"""How many nodes, devices and copies a claim gets; the allocator's rules on fixture slices."""

from __future__ import annotations

from fleet.inventory import Checker, Inventory
from tests.inventory.conftest import CLASSES, GPU, claim, fixture_slices, renamed, request

H100 = f"{GPU}.productName.lowerAscii().matches('^.*h100.*$')"
LARGE = "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity(\"40Gi\"))"


def test_guide_templates(checker: Checker) -> None:
    single = checker.check_claim(claim(request()))
    assert (single.nodes, single.devices, single.capacity) == (4, 25, 25)  # 8 + 8 + 8 whole GPUs + 1 on the MIG node
    h100 = checker.check_claim(claim(request("gpu", H100)))
    assert (h100.nodes, h100.devices, h100.capacity) == (2, 9, 9)
    large = checker.check_claim(claim(request("gpu", LARGE)))
    assert large.capacity == 25
    two = checker.check_claim(claim(request("gpus", count=2)))
    assert (two.nodes, two.capacity) == (3, 12)  # the MIG node has a single whole GPU
    assert all(r.satisfiable and not r.findings for r in (single, h100, large, two))


def test_count_larger_than_any_node(checker: Checker) -> None:
    report = checker.check_claim(claim(request("gpus", count=9)))
    assert not report.satisfiable
    [finding] = report.findings
    assert finding.rule == "claim-unsatisfiable"
    assert "needs 9 devices on one node; at most 8" in finding.message
    assert finding.request_index == 0


def test_allocation_mode_all_takes_every_matching_device(checker: Checker) -> None:
    report = checker.check_claim(claim(request("gpus", H100, allocationMode="All")))
    assert (report.nodes, report.devices, report.capacity) == (2, 9, 2)


def test_first_available_is_tried_in_order(checker: Checker) -> None:
    spec = claim(
        {
            "name": "gpu",
            "firstAvailable": [
                {
                    "name": "b200",
                    "deviceClassName": "gpu.nvidia.com",
                    "count": 1,
                    "selectors": [{"cel": {"expression": f"{GPU}.productName == 'NVIDIA B200'"}}],
                },
                {
                    "name": "mig-3g",
                    "deviceClassName": "mig.nvidia.com",
                    "selectors": [{"cel": {"expression": f"{GPU}.profile == '3g.40gb'"}}],
                },
            ],
        }
    )
    report = checker.check_claim(spec)
    assert (report.nodes, report.capacity) == (1, 1)
    assert [(a.name, a.devices, a.nodes) for a in report.requests[0]] == [("gpu/b200", 0, 0), ("gpu/mig-3g", 1, 1)]


def test_match_attribute_keeps_mig_devices_on_one_parent(checker: Checker) -> None:
    spec = claim(
        request("a", f"{GPU}.profile == '1g.10gb'", device_class="mig.nvidia.com"),
        request("b", f"{GPU}.profile == '3g.40gb'", device_class="mig.nvidia.com"),
        constraints=[{"requests": [], "matchAttribute": "gpu.nvidia.com/parentUUID"}],
    )
    assert checker.check_claim(spec).capacity == 1
    apart = claim(
        request("a", f"{GPU}.profile == '1g.10gb'", device_class="mig.nvidia.com", count=2),
        constraints=[{"requests": ["a"], "distinctAttribute": "gpu.nvidia.com/profile"}],
    )
    report = checker.check_claim(apart)
    assert not report.satisfiable
    assert report.findings[-1].rule == "claim-unsatisfiable"
    assert report.findings[-1].constraint_index == 0


def test_devices_of_one_claim_come_from_one_node() -> None:
    two_h200 = [renamed(s, f"h200-{i}") for s in fixture_slices("h200-node") for i in range(2)]
    for item in two_h200:
        item["spec"]["devices"] = item["spec"]["devices"][:5]
    checker = Checker(inventory=Inventory.from_slices(two_h200), classes=CLASSES)
    assert checker.check_claim(claim(request("gpus", count=5))).nodes == 2
    assert not checker.check_claim(claim(request("gpus", count=6))).satisfiable  # 10 devices, but 5 per node


def test_shared_counters_limit_partitionable_devices() -> None:
    inventory = Inventory.from_slices(fixture_slices("mig-node-dynamic"))
    checker = Checker(inventory=inventory, classes=CLASSES)
    whole = checker.check_claim(claim(request("gpu")))
    assert whole.capacity == 1
    mig_and_whole = claim(request("gpu"), request("mig", device_class="mig.nvidia.com"))
    assert not checker.check_claim(mig_and_whole).satisfiable  # the whole GPU consumes every counter


def test_untolerated_device_taints_exclude_devices() -> None:
    slices = fixture_slices("h200-node")
    slices[0]["spec"]["devices"][0]["taints"] = [{"key": "gpu.nvidia.com/xid", "effect": "NoSchedule"}]
    checker = Checker(inventory=Inventory.from_slices(slices), classes=CLASSES)
    assert checker.check_claim(claim(request("gpu"))).devices == 7
    tolerated = request("gpu", tolerations=[{"key": "gpu.nvidia.com/xid", "operator": "Exists"}])
    assert checker.check_claim(claim(tolerated)).devices == 8


def test_identical_specs_are_checked_once(checker: Checker) -> None:
    assert checker.check_claim(claim(request("gpu", H100))) is checker.check_claim(claim(request("gpu", H100)))


def test_template_object(checker: Checker) -> None:
    template = {"kind": "ResourceClaimTemplate", "spec": {"spec": claim(request("gpus", count=2))}}
    assert checker.check_template(template).capacity == 12
