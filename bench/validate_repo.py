"""Benchmark: ``fleetctl validate`` on 10,000 ResourceClaimTemplates and a 1,000-node inventory.

The example repository plus 50 teams x 200 templates (selectors drawn from
the guide's and a few more, so CEL compile caching is exercised as in real
repositories where teams copy selectors), and an inventory of 1,000 nodes x 8
GPUs built from the fixture ResourceSlices (H100, A100, H200 in turn, unique
names and UUIDs) for cluster gpu-east. Prints load, check (two clusters, so
every per-cluster rule runs twice) and satisfiability times separately, wall
and CPU (the box is shared: CPU time is the steadier figure), peak memory, and
a final ``RESULT`` line. Not a timed test: run it by hand,

    .venv/bin/python bench/validate_repo.py [--teams 50] [--templates 200] [--nodes 1000] [--dynamic-mig]

``--dynamic-mig`` measures instead the whole pipeline against an inventory whose H100 and
A100 nodes publish as the NVIDIA driver's DynamicMIG does (every placement of every MIG
profile a partitionable device, a counter set per GPU): reading the slices into an
Inventory (what ``--inventory FILE`` does after parsing the file), loading the repository,
every check and the satisfiability of every template with counters across copies, with
the cyclic collector paused as ``fleetctl validate`` pauses it (``pipelines.collector_paused``).
The target is 3 s for that whole pipeline.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from bench.common import gpu_slices, peak_rss_mb
from fleet.engine import pipelines
from fleet.inventory import Inventory
from fleet.manifests import read_revision
from fleet.policy import check, validate

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fleet"
SELECTORS = [
    "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*h100.*$')",
    "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity(\"40Gi\"))",
    "device.attributes['gpu.nvidia.com'].architecture == 'Hopper' && "
    "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity(\"80Gi\"))",
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'",
    "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.0.0')) >= 0",
    "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))",
]


def write_repo(root: Path, *, teams: int, templates: int) -> None:
    shutil.copytree(EXAMPLE, root)
    for t in range(teams):
        folder = root / "teams" / f"team-{t}"
        folder.mkdir()
        (folder / "team.yaml").write_text(
            "apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Team\n"
            f"metadata: {{name: team-{t}}}\nspec:\n  namespaces: [team-{t}]\n"
            f"  owners: [{{name: team-{t}-admins}}]\n  deviceClasses: [gpu.nvidia.com]\n"
            f"  quota: {{gpu.nvidia.com: {templates * 2}}}\n"
        )
        for i in range(templates):
            selector = SELECTORS[(t + i) % len(SELECTORS)]
            (folder / f"t-{i}.yaml").write_text(
                "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
                f"metadata:\n  name: t-{i}\n  namespace: team-{t}\nspec:\n  spec:\n    devices:\n"
                "      requests:\n      - name: gpu\n        exactly:\n          deviceClassName: gpu.nvidia.com\n"
                f"          count: {1 + i % 2}\n          selectors:\n          - cel:\n"
                f"              expression: |\n                {selector}\n"
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--teams", type=int, default=50)
    parser.add_argument("--templates", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--dynamic-mig", action="store_true", help="H100/A100 nodes with every MIG placement")
    args = parser.parse_args()
    pipelines.tune_gc()  # as fleetctl validate does
    if args.dynamic_mig:
        dynamic(args)
        return
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        root = Path(tmp) / "repo"
        write_repo(root, teams=args.teams, templates=args.templates)
        # first, in a fresh process: the pipeline as fleetctl validate runs it in CI
        # (load, then every check, the declared-pool check on)
        pipeline_started, cpu5 = time.perf_counter(), time.process_time()
        declared = validate(read_revision(root))
        pipeline_s, pipeline_cpu = time.perf_counter() - pipeline_started, time.process_time() - cpu5
        verdicts, pipeline_findings = len(declared.satisfaction), len(declared.findings)
        del declared
        started, cpu0 = time.perf_counter(), time.process_time()
        revision = read_revision(root)
        loaded, cpu1 = time.perf_counter(), time.process_time()
        findings = check(revision)
        checked, cpu2 = time.perf_counter(), time.process_time()
        inventory = Inventory.from_slices(gpu_slices(args.nodes))
        started_inv, cpu3 = time.perf_counter(), time.process_time()
        result = validate(revision, clusters=["gpu-east"], inventories={"gpu-east": inventory})
        satisfied, cpu4 = time.perf_counter(), time.process_time()
    count = sum(m.kind == "ResourceClaimTemplate" for m in revision.manifests)
    load_s, check_s = loaded - started, checked - loaded
    print(f"templates: {count}  objects: {len(revision.manifests)}  findings: {len(findings)}")
    print(f"load (read + parse + models): {load_s:.2f} s wall, {cpu1 - cpu0:.2f} s CPU")
    print(f"check (policy + CEL, 2 clusters): {check_s:.2f} s wall, {cpu2 - cpu1:.2f} s CPU")
    sat_s = satisfied - started_inv
    unsatisfiable = sum(1 for s in result.satisfaction if s.nodes == 0)
    print(
        f"validate gpu-east with {args.nodes} nodes x 8 GPUs ({len(inventory.devices)} devices): "
        f"{sat_s:.2f} s wall, {cpu4 - cpu3:.2f} s CPU; {len(result.satisfaction)} claims, "
        f"{unsatisfiable} unsatisfiable"
    )
    print(
        f"whole pipeline (load + all checks, declared pools of both clusters): {pipeline_s:.2f} s wall, "
        f"{pipeline_cpu:.2f} s CPU; {verdicts} claim verdicts, {pipeline_findings} findings"
    )
    print(f"load average during the run: {os.getloadavg()[0]:.1f} (2 cores shared: wall time inflates)")
    print(f"peak RSS: {peak_rss_mb():.0f} MiB")
    print(
        f"RESULT templates={count} load_s={load_s:.2f} check_s={check_s:.2f} "
        f"total_s={load_s + check_s:.2f} total_cpu_s={cpu2 - cpu0:.2f} findings={len(findings)} "
        f"inventory_devices={len(inventory.devices)} validate_inventory_s={sat_s:.2f} "
        f"validate_inventory_cpu_s={cpu4 - cpu3:.2f} pipeline_declared_s={pipeline_s:.2f} "
        f"pipeline_declared_cpu_s={pipeline_cpu:.2f} peak_rss_mb={peak_rss_mb():.0f}"
    )


def dynamic(args: argparse.Namespace) -> None:
    """The whole pipeline on a dynamic-MIG inventory (see the module docstring)."""
    slices = gpu_slices(args.nodes, dynamic_mig=True)
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        root = Path(tmp) / "repo"
        write_repo(root, teams=args.teams, templates=args.templates)
        # as fleetctl validate runs it: the cyclic collector paused over load, inventory and checks
        with pipelines.collector_paused():
            started, cpu0 = time.perf_counter(), time.process_time()
            inventory = Inventory.from_slices(slices)
            built, cpu1 = time.perf_counter(), time.process_time()
            revision = read_revision(root)
            loaded, cpu2 = time.perf_counter(), time.process_time()
            result = validate(revision, clusters=["gpu-east"], inventories={"gpu-east": inventory})
            done, cpu3 = time.perf_counter(), time.process_time()
    mig = sum(1 for d in inventory.devices if d.consumes)
    print(
        f"inventory: {len(inventory.devices)} devices ({mig} partitionable) on {len(inventory.nodes)} nodes, "
        f"{len(inventory.counters)} counter sets: {built - started:.2f} s wall, {cpu1 - cpu0:.2f} s CPU"
    )
    print(f"load: {loaded - built:.2f} s wall, {cpu2 - cpu1:.2f} s CPU")
    print(f"checks + satisfiability: {done - loaded:.2f} s wall, {cpu3 - cpu2:.2f} s CPU")
    print(f"whole pipeline: {done - started:.2f} s wall, {cpu3 - cpu0:.2f} s CPU (target 3 s)")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} (2 cores shared: wall time inflates)")
    print(
        f"RESULT templates={len(result.satisfaction)} devices={len(inventory.devices)} partitionable={mig} "
        f"inventory_s={built - started:.2f} load_s={loaded - built:.2f} validate_s={done - loaded:.2f} "
        f"pipeline_s={done - started:.2f} pipeline_cpu_s={cpu3 - cpu0:.2f} target_s=3 "
        f"met={'yes' if cpu3 - cpu0 <= 3 else 'no'} peak_rss_mb={peak_rss_mb():.0f}"
    )


if __name__ == "__main__":
    main()
