"""Benchmark: satisfiability of 10,000 claim templates on 1,000 nodes x 8 GPUs, grouped vs naive CEL evaluation.

What is measured is the CEL and inventory part of ``fleetctl validate``
(``fleet.inventory.Checker`` over ``fleet.cel``): build the Inventory from
8,000 ResourceSlice devices, compile every selector, evaluate class + request
selectors, count nodes/devices/copies per template with findings. The
repository loading around it is measured by bench/validate_repo.py.

Inventory: 1,000 nodes built from the fixture ResourceSlices (H100, A100,
H200 whole-GPU nodes in turn), each with its own node name, UUIDs, PCI bus IDs
and NUMA layout, and three driver versions across the fleet.
Templates: 10,000 drawn (fixed seed) from the guide's selectors and variations
teams write: model regexes, memory and driver-version thresholds (hundreds of
distinct expressions), counts 1-8, allocationMode All, firstAvailable lists,
matchAttribute/distinctAttribute constraints, and some that can never be
satisfied (B200, removed ``index`` attribute).

Naive comparison: every selector of a template evaluated on every device
(the device converted in full each time, no grouping, no caching). It is far
too slow to run for all 10,000 templates, so a random sample of templates is
run and the time extrapolated linearly (printed as such).

    .venv/bin/python bench/validate.py [--templates 10000] [--nodes 1000] [--naive-sample 25]
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import contextlib

from common import gpu_slices

from fleet import cel
from fleet.cel.devices import projection
from fleet.inventory import Checker, Inventory

GPU = "device.attributes['gpu.nvidia.com']"
CAP = "device.capacity['gpu.nvidia.com']"
DRIVERS = ("580.95.5", "570.172.8", "580.126.9")
CLASSES = {
    name: {
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == 'gpu.nvidia.com' && {GPU}.type == '{kind}'"}}]}
    }
    for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"))
}


def selector(rng: random.Random) -> str:
    choice = rng.randrange(9)
    if choice == 0:
        return f"{GPU}.productName.lowerAscii().matches('^.*{rng.choice(['h100', 'a100', 'h200'])}.*$')"
    if choice == 1:
        return f'{CAP}.memory.isGreaterThan(quantity("{rng.randrange(8, 150)}Gi"))'
    if choice == 2:
        return f"{CAP}.memory.compareTo(quantity('{rng.randrange(10, 140) * 1024}Mi')) >= 0"
    if choice == 3:
        return (
            f"{GPU}.driverVersion.compareTo(semver('{rng.choice(['570', '575', '580'])}.{rng.randrange(200)}.0')) >= 0"
        )
    if choice == 4:
        return f"{GPU}.architecture == '{rng.choice(['Hopper', 'Ampere'])}'"
    if choice == 5:
        return (
            f"{GPU}.architecture == 'Hopper' && {CAP}.memory.isGreaterThan(quantity('{rng.randrange(60, 120)}Gi'))"
            f" && {GPU}.cudaComputeCapability.isGreaterThan(semver('8.9.0'))"
        )
    if choice == 6:
        return f"{GPU}.productName == 'NVIDIA {rng.choice(['H100 80GB HBM3', 'A100-SXM4-80GB', 'H200', 'B200'])}'"
    if choice == 7:
        return f"device.attributes['resource.kubernetes.io'].numaNode == {rng.randrange(2)}"
    return f"{GPU}.index == {rng.randrange(8)}" if rng.random() < 0.3 else f"has({GPU}.uuid)"


def template(rng: random.Random, number: int) -> dict[str, Any]:
    def exactly(name: str, count: int = 1, selectors: int = 1) -> dict[str, Any]:
        body: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "count": count}
        if selectors:
            body["selectors"] = [{"cel": {"expression": selector(rng)}} for _ in range(selectors)]
        return {"name": name, "exactly": body}

    kind = rng.random()
    devices: dict[str, Any]
    if kind < 0.55:
        devices = {"requests": [exactly("gpu", rng.choice([1, 1, 1, 2, 4, 8]), rng.choice([0, 1, 1, 2]))]}
    elif kind < 0.65:
        request = exactly("gpus", selectors=1)
        request["exactly"].update(allocationMode="All")
        del request["exactly"]["count"]
        devices = {"requests": [request]}
    elif kind < 0.80:
        subrequests = []
        for sub in ("h200", "h100", "any"):
            body = exactly(sub, rng.choice([1, 2]))
            subrequests.append({"name": sub, **body["exactly"]})
        devices = {"requests": [{"name": "gpu", "firstAvailable": subrequests}]}
    elif kind < 0.92:
        devices = {
            "requests": [exactly("gpus", rng.choice([2, 4]))],
            "constraints": [
                {
                    "requests": ["gpus"],
                    "matchAttribute": rng.choice(
                        [
                            "resource.kubernetes.io/pcieRoot",
                            "resource.kubernetes.io/numaNode",
                            "gpu.nvidia.com/productName",
                        ]
                    ),
                }
            ],
        }
    else:
        devices = {
            "requests": [exactly("a"), exactly("b")],
            "constraints": [{"requests": ["a", "b"], "distinctAttribute": "resource.kubernetes.io/numaNode"}],
        }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"t{number}", "namespace": f"team-{number % 50}"},
        "spec": {"spec": {"devices": devices}},
    }


def grouped(slices: list[dict[str, Any]], templates: list[dict[str, Any]]) -> tuple[float, float, list[Any]]:
    started, cpu = time.perf_counter(), time.process_time()
    inventory = Inventory.from_slices(slices)
    checker = Checker(inventory=inventory, classes=CLASSES)
    reports = [checker.check_template(t) for t in templates]
    return time.perf_counter() - started, time.process_time() - cpu, reports


def naive(slices: list[dict[str, Any]], templates: list[dict[str, Any]]) -> float:
    """Every selector (class's and request's) on every device, converting the full device each time."""
    inventory = Inventory.from_slices(slices)
    everything = cel.References(whole_device=True)
    started = time.perf_counter()
    for item in templates:
        for request in item["spec"]["spec"]["devices"]["requests"]:
            alternatives = request.get("firstAvailable") or [request.get("exactly")]
            for alternative in alternatives:
                expressions = [s["cel"]["expression"] for s in CLASSES["gpu.nvidia.com"]["spec"]["selectors"]]
                expressions += [s["cel"]["expression"] for s in alternative.get("selectors") or []]
                compiled = []
                for expression in expressions:
                    with contextlib.suppress(cel.SelectorCompileError):
                        compiled.append(cel.compile_selector(expression))
                for device in inventory.devices:
                    key = projection(device.device, everything)
                    for sel in compiled:
                        try:
                            if not sel.evaluate_projection(key):
                                break
                        except cel.SelectorRuntimeError:
                            break
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--naive-sample", type=int, default=25)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    slices = gpu_slices(args.nodes, driver_versions=DRIVERS)
    templates = [template(rng, n) for n in range(args.templates)]
    expressions = {
        s["cel"]["expression"]
        for t in templates
        for r in t["spec"]["spec"]["devices"]["requests"]
        for a in (r.get("firstAvailable") or [r.get("exactly")])
        for s in a.get("selectors") or []
    }
    devices = sum(len(s["spec"]["devices"]) for s in slices)
    print(
        f"inventory: {args.nodes} nodes, {devices} devices; {args.templates} templates, "
        f"{len(expressions)} distinct selector expressions"
    )

    gc.collect()
    wall, cpu, reports = grouped(slices, templates)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    unsatisfiable = sum(1 for r in reports if not r.satisfiable)
    findings = sum(len(r.findings) for r in reports)
    print(
        f"grouped:  {wall:.2f} s wall, {cpu:.2f} s CPU for {args.templates} templates "
        f"({unsatisfiable} never satisfiable, {findings} findings); peak RSS {rss:.0f} MiB"
    )

    sample = random.Random(args.seed + 1).sample(templates, min(args.naive_sample, len(templates)))
    naive_wall = naive(slices, sample)
    per_template = naive_wall / len(sample)
    extrapolated = per_template * args.templates
    ratio = extrapolated / wall
    print(
        f"naive:    {naive_wall:.2f} s for a sample of {len(sample)} templates "
        f"({per_template * 1000:.0f} ms each) -> extrapolated {extrapolated:.0f} s for {args.templates}"
    )
    print(f"ratio:    naive / grouped = {ratio:.0f}x")
    target = 5.0
    print(f"target:   <= {target:.0f} s wall on 2 cores: {'met' if wall <= target else 'NOT met'}")
    print(
        f"RESULT templates={args.templates} nodes={args.nodes} devices={devices} wall_s={wall:.2f} cpu_s={cpu:.2f} "
        f"naive_sample={len(sample)} naive_extrapolated_s={extrapolated:.0f} ratio={ratio:.0f} "
        f"peak_rss_mib={rss:.0f} target_s={target:.0f} met={'yes' if wall <= target else 'no'}"
    )


if __name__ == "__main__":
    main()
