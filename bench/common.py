"""Shared pieces of the benchmarks: a private sandbox, synthetic GPU ledgers, peak memory, the RESULT line."""

from __future__ import annotations

import contextlib
import resource
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio

from fleet.sandbox import Sandbox, clusters, gpus, profiles


@contextlib.contextmanager
def sandbox(pools: dict[str, Any] | None = None) -> Iterator[Sandbox]:
    """A sandbox of its own for one benchmark run, stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        profile = profiles.parse({"pools": pools}) if pools else profiles.load(None)
        sb = clusters.up(directory=Path(tmp) / "sandbox", profile=profile)
        try:
            yield sb
        finally:
            clusters.down(directory=Path(tmp) / "sandbox", progress=lambda _m: None)


async def until(check: Callable[[], Awaitable[object]], *, within: float = 600.0, every: float = 0.02) -> float:
    """Poll ``check`` every ``every`` seconds until it is true (a remote state: no event to wait on);
    the seconds that took. ``TimeoutError`` past ``within``."""
    started = time.monotonic()
    with anyio.fail_after(within):
        while True:
            if await check():
                break
            await anyio.sleep(every)
    return time.monotonic() - started


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb(pid: int) -> float:
    """Current resident memory of another process, in MiB (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def result(**figures: object) -> None:
    """Print the one closing line every benchmark ends with."""
    print("RESULT " + " ".join(f"{k}={v}" for k, v in figures.items()), flush=True)


def gpu_slices(nodes: int, *, driver_versions: tuple[str, ...] = (), dynamic_mig: bool = False) -> list[dict[str, Any]]:
    """ResourceSlices of ``nodes`` nodes x 8 GPUs exactly as the NVIDIA driver publishes them.

    Built by the sandbox's own publisher (``fleet.sandbox.gpus``), cycling H100, A100 and H200
    nodes, so identities (UUID, PCI bus id) differ per device and node. ``driver_versions``
    cycles the ``driverVersion`` per group of three nodes, for version selectors to split on.
    ``dynamic_mig`` publishes the H100 and A100 nodes with the driver's DynamicMIG gate: every
    placement of every MIG profile as a partitionable device, a counter set per GPU, one slice
    of counters and one slice per GPU.
    """
    models = [gpus.MODELS[key] for key in ("h100", "a100", "h200")]
    out = []
    for index in range(nodes):
        model = models[index % 3]
        node = gpus.NodeSpec(
            name=f"gpu-{index:04d}",
            ordinal=index + 1,
            pool="bench",
            model=model,
            gpus=8,
            mig_strategy="dynamic" if dynamic_mig and model.mig_profiles else "static",
        )
        items = gpus.slice_manifests(node, node_uid=f"bench-{index}")
        if driver_versions:
            version = driver_versions[(index // 3) % len(driver_versions)]
            for item in items:
                for device in item["spec"].get("devices") or ():
                    device["attributes"]["driverVersion"] = {"version": version}
        out += items
    return out
