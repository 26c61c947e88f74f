"""What the controller's parsed repository retains, by part: ``python tools/memory.py``.

A 10,000-object fleet (bench/diff.py's generator) is checked and planned once the
controller's way (``pipelines.check_and_plan`` with a ``LoadCache``), then a one-file
commit is checked again. Prints the RSS after imports and after the first load, the
times of both loads, and the MiB reachable from each part of the cache (object sizes
over ``gc.get_referents``, each object counted in the first part that reaches it; no
allocator overhead). Ends with a ``RESULT`` line. Not a benchmark of ``bench/run``:
no sandbox (the watch cache is measured by ``bench/run controller``).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from common import rss_mb
from controller import retained_mib
from diff import CLUSTER, write_repo

from fleet.engine import pipelines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-memory-") as tmp:
        root = Path(tmp)
        write_repo(root, objects=args.objects)
        imported = rss_mb(os.getpid())
        cache = pipelines.LoadCache()
        started = time.perf_counter()
        pipelines.check_and_plan(root, cluster=CLUSTER, revision="first", cache=cache)
        first_s, loaded = time.perf_counter() - started, rss_mb(os.getpid())
        gc.collect()
        gc.freeze()  # as the controller does (fleet.controller.heaps): the next load's time is not the collector's
        changed = sorted(root.glob("teams/*/*.yaml"))[0]
        changed.write_text(changed.read_text() + "\n")
        started = time.perf_counter()
        pipelines.check_and_plan(root, cluster=CLUSTER, revision="second", cache=cache)
        commit_s = time.perf_counter() - started
        manifests = [m for parsed in cache.parsed.entries.values() for m in parsed[0]]
        seen: set[int] = set()
        parts = {
            "file bytes (TreeCache)": retained_mib(cache.tree, seen=seen),
            "positions": retained_mib(*[m.positions for m in manifests], seen=seen),
            "data": retained_mib(*[m.data for m in manifests], seen=seen),
            # only the models kept: reading a released one would make it again (``Manifest.release``)
            "models": retained_mib(*[m.model for m in manifests if not m.released], seen=seen),
            "memos (render, requests, findings)": retained_mib(*[m.memo for m in manifests], seen=seen),
            "manifests, the rest": retained_mib(*manifests, seen=seen),
            "ParseCache, the rest": retained_mib(cache.parsed, seen=seen),
            "last check and plan (Increments)": retained_mib(cache.increments, seen=seen),
        }
        total = sum(parts.values())
    print(f"{len(manifests)} manifests; RSS after imports {imported:.0f} MiB, after the first load {loaded:.0f} MiB")
    print(f"first load {first_s:.2f} s; a one-file commit {commit_s:.2f} s")
    for name, mib in parts.items():
        print(f"  {name:<36} {mib:6.1f} MiB")
    print(f"  {'LoadCache in all':<36} {total:6.1f} MiB")
    print(
        f"RESULT manifests={len(manifests)} first_load_s={first_s:.2f} commit_s={commit_s:.2f} "
        f"rss_imports_mib={imported:.0f} rss_loaded_mib={loaded:.0f} load_cache_mib={total:.0f} "
        + " ".join(f"{key}_mib={parts[name]:.1f}" for key, name in KEYS.items())
    )


KEYS = {"positions": "positions", "data": "data", "models": "models", "memos": "memos (render, requests, findings)"}


if __name__ == "__main__":
    main()
