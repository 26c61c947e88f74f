"""How long the git source takes per commit on a large repository: ``python tools/source_syncs.py``.

A 10,000-object fleet (bench/diff.py's generator) is committed to a local bare repository;
then ``--commits`` commits of one file each are synced the controller's way
(``sync(collect=False)``, then ``collect()``), with or without spare checkouts prepared
up front (``--no-spares``: the first commit writes a fresh checkout; ``collect()`` still prepares
one spare after each commit). Last,
``read_tree`` of the newest checkout is timed without and with a ``TreeCache`` that read
the previous checkout (the recycled directory keeps unchanged files' inodes).
Prints one line per slow step and a ``RESULT`` line. Not a benchmark of ``bench/run``: no sandbox.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from diff import write_repo

from fleet.manifests import Limits, TreeCache, read_tree
from fleet.source import GitSource


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                   capture_output=True)  # fmt: skip


async def run(root: Path, *, objects: int, commits: int, spares: bool) -> None:
    bare, work = root / "remote.git", root / "work"
    bare.mkdir()
    work.mkdir()
    git(bare, "init", "-q", "--bare", "-b", "main")
    git(work, "init", "-q", "-b", "main")
    git(work, "remote", "add", "origin", str(bare))
    write_repo(work, objects=objects)
    git(work, "add", "-A")
    git(work, "commit", "-qm", "fleet")
    git(work, "push", "-q", "origin", "main")
    src = GitSource(url=f"file://{bare}", ref="main", path="", cache_dir=root / "cache")
    checkout = await src.sync(collect=False)
    if spares:
        started = time.perf_counter()
        for _ in range(src.keep):
            await src.collect()
        print(f"spare checkouts prepared in {time.perf_counter() - started:.2f} s")
    syncs: list[float] = []
    cache = TreeCache()
    for i in range(commits):
        (work / "teams" / "team0" / f"n{i}.yaml").write_text(f"a: {i}\n")
        git(work, "add", "-A")
        git(work, "commit", "-qm", f"n{i}")
        git(work, "push", "-q", "origin", "main")
        if i == commits - 1:
            await anyio.sleep(TreeCache.RACY_SECONDS + 0.1)
            cache.begin(now=time.time())
            read_tree(checkout.path, limits=Limits(), cache=cache)  # the previous revision, read once
        started = time.perf_counter()
        checkout = await src.sync(collect=False)
        syncs.append(time.perf_counter() - started)
        started = time.perf_counter()
        await src.collect()
        collected = time.perf_counter() - started
        if syncs[-1] > 0.3 or collected > 0.3:
            print(f"commit {i}: sync {syncs[-1]:.2f} s, collect {collected:.2f} s")
    started = time.perf_counter()
    read_tree(checkout.path, limits=Limits())
    cold = time.perf_counter() - started
    cache.begin(now=time.time())
    started = time.perf_counter()
    read_tree(checkout.path, limits=Limits(), cache=cache)
    warm = time.perf_counter() - started
    print(f"read_tree of the newest checkout: {cold:.3f} s uncached, {warm:.3f} s with the TreeCache "
          f"({cache.reused} files reused)")  # fmt: skip
    ordered = sorted(syncs)
    print(f"RESULT objects={objects} commits={commits} spares={'yes' if spares else 'no'} "
          f"sync_max_s={ordered[-1]:.2f} sync_p50_s={ordered[len(ordered) // 2]:.2f} "
          f"read_uncached_s={cold:.3f} read_cached_s={warm:.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=45)
    parser.add_argument("--no-spares", action="store_true", help="prepare no spare checkouts before the first commit")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-source-syncs-") as tmp:
        anyio.run(lambda: run(Path(tmp), objects=args.objects, commits=args.commits, spares=not args.no_spares))


if __name__ == "__main__":
    main()
