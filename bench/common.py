"""Shared pieces of the benchmarks: a private sandbox, peak memory, the RESULT line."""

from __future__ import annotations

import contextlib
import resource
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.sandbox import Sandbox, clusters, profiles


@contextlib.contextmanager
def sandbox(pools: dict[str, int] | None = None) -> Iterator[Sandbox]:
    """A sandbox of its own for one benchmark run, stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        profile = profiles.parse({"pools": pools}) if pools else profiles.load(None)
        sb = clusters.up(directory=Path(tmp) / "sandbox", profile=profile)
        try:
            yield sb
        finally:
            clusters.down(directory=Path(tmp) / "sandbox", progress=lambda _m: None)


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
