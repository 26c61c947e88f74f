"""Benchmark: git source sync times (first, no-op, one commit) and webhook round trips.

A repository of ``--files`` YAML files (10,000 by default, about the size of the
validate benchmark's repository) with a few commits of history is served by the
real ``git daemon`` on loopback. ``GitSource.sync()`` is timed for the first sync
(fetch into an empty cache and check out), a no-op sync (nothing new: the cost of
each poll) and a sync after a one-file commit (median of ``--rounds``). Then the
controller's HTTP server (uvicorn in this process) receives ``--hooks`` signed
GitHub push webhooks one after the other over HTTP/1.1 keep-alive: the round trip
from send to the 202, median and 99th percentile. Not a timed test: run it by hand,

    bench/run source [--files 10000] [--rounds 5] [--hooks 300]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import hmac
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import peak_rss_mb, result
from fleet.controller import servers
from fleet.controller.metrics import Metrics
from fleet.source import GitSource
from tests.source.gitservers import Upstream, daemon


def build(root: Path, *, files: int) -> Upstream:
    upstream = Upstream(root)
    upstream.commit(
        {
            f"fleet/teams/t{i % 50}/claims/c{i}.yaml": f"kind: ResourceClaimTemplate\nname: c{i}\n" + "# padding\n" * 20
            for i in range(files)
        },
        message="first",
    )
    for n in range(5):
        upstream.commit({"fleet/fleet.yaml": f"kind: Fleet\n# history {n}\n"}, message=f"history {n}")
    return upstream


async def syncs(upstream: Upstream, *, cache: Path, port: int, rounds: int) -> dict[str, float]:
    source = GitSource(url=f"git://127.0.0.1:{port}/repo.git", ref="main", path="fleet", cache_dir=cache, timeout=300)
    started = time.perf_counter()
    await source.sync()
    first = time.perf_counter() - started
    noop, commit = [], []
    for n in range(rounds):
        started = time.perf_counter()
        await source.sync()
        noop.append(time.perf_counter() - started)
        upstream.commit({"fleet/fleet.yaml": f"kind: Fleet\n# round {n}\n"})
        started = time.perf_counter()
        await source.sync()
        commit.append(time.perf_counter() - started)
    return {
        "first_sync_s": round(first, 2),
        "noop_sync_s": round(statistics.median(noop), 3),
        "commit_sync_s": round(statistics.median(commit), 2),
    }


async def hooks(*, count: int) -> dict[str, float]:
    secret = b"bench"
    pushes: list[str] = []
    app = servers.build(metrics=Metrics(), ready=lambda: True, on_push=pushes.append, secret=secret, ref="main")
    times = []
    async with anyio.create_task_group() as group:
        port = await group.start(functools.partial(servers.serve, app=app, host="127.0.0.1", port=0))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for n in range(count):
                body = json.dumps({"ref": "refs/heads/main", "after": f"{n:040x}"}).encode()
                headers = {
                    "X-GitHub-Event": "push",
                    "X-GitHub-Delivery": str(n),
                    "X-Hub-Signature-256": "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest(),
                }
                started = time.perf_counter()
                response = await client.post("/webhook", content=body, headers=headers)
                times.append(time.perf_counter() - started)
                assert response.status_code == 202, response.text
            started = time.perf_counter()
            await client.get("/metrics")
            scrape = time.perf_counter() - started
        group.cancel_scope.cancel()
    assert len(pushes) == count
    times.sort()
    return {
        "webhook_p50_ms": round(statistics.median(times) * 1000, 2),
        "webhook_p99_ms": round(times[int(len(times) * 0.99) - 1] * 1000, 2),
        "metrics_scrape_ms": round(scrape * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hooks", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-bench-source-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        upstream = build(root / "upstream", files=args.files)
        print(f"repository: {args.files} files, 6 commits, built in {time.perf_counter() - started:.1f} s", flush=True)
        with daemon(base=upstream.root) as port:
            figures = anyio.run(functools.partial(syncs, upstream, cache=root / "cache", port=port, rounds=args.rounds))
    for key, value in figures.items():
        print(f"{key:>18}: {value}")
    webhook = anyio.run(functools.partial(hooks, count=args.hooks))
    for key, value in webhook.items():
        print(f"{key:>18}: {value}")
    result(files=args.files, **figures, hooks=args.hooks, **webhook, peak_rss_mb=round(peak_rss_mb()))


if __name__ == "__main__":
    main()
