"""What posting a commit status adds to a reconcile (issue 24: ≤ 5 ms; it runs beside it).

A synthetic fleet (bench/diff.py's generator, ``--objects``, default 500) in a local
git repository; the controller in this process against a sandbox of its own, its watch
cache and Lease running, and its reconcile called directly for each new commit (a
commit changing one claim template), so the reconcile is timed alone. Rounds alternate
*with* a commit status poster (every reconcile hands over ``pending`` and ``success``,
both posted to a loopback HTTP server shaped as GitHub's statuses API, answering after
``--latency`` seconds like a host across the internet, while the reconcile runs) and
*without* one: the peer, measured in the same run on the same sandbox. After each round
the poster is drained, so one round's posts never overlap the next round's reconcile.

Figures: the reconcile's median with and without the poster and their difference
(``added_ms``, the goal), the time ``submit`` itself takes in the reconcile (``submit_us``,
per call), and the posts the server received.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from common import result, sandbox
from controller import CRD, git, push
from diff import CLUSTER, write_repo

from fleet import hosts, kube
from fleet.controller import controllers, leaders
from fleet.sandbox import Sandbox, credentials
from fleet.source import GitSource
from tests.hosts.apis import StatusAPI


async def run(sb: Sandbox, root: Path, *, objects: int, rounds: int, latency: float) -> None:
    bare, work = root / "remote.git", root / "work"
    bare.mkdir()
    git(bare, "init", "-q", "--bare", "-b", "main")
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    git(work, "remote", "add", "origin", str(bare))
    count = write_repo(work, objects=objects)
    sb.kubectl("apply", "-f", str(CRD))
    sb.kubectl("wait", "--for=condition=Established", "crd/fleetsyncs.fleet.gpufleet.dev", "--timeout=60s")
    push(work, "the fleet")
    token = root / "token"
    token.write_text("bench-token\n")
    api = StatusAPI(latency=latency)
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), context=credentials.CLUSTER, timeout=60)
    source = GitSource(url=f"file://{bare}", ref="main", path="", cache_dir=root / "cache")
    ctl = controllers.Controller(
        client=client, source=source, options=controllers.Options(cluster=CLUSTER, health_timeout=600)
    )
    with api.serving() as base:
        where = hosts.Target("github", f"{base}/api/v3", "org/fleet")
        poster = hosts.Poster(target=where, token_file=token)
        submits: list[float] = []
        submit = poster.submit

        def timed(status: hosts.CommitStatus) -> None:
            started = time.perf_counter()
            submit(status)
            submits.append(time.perf_counter() - started)

        poster.submit = timed  # type: ignore[method-assign]
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: ctl.cache.run(client=client))
                tg.start_soon(lambda: leaders.elect(client=client, cluster=CLUSTER, identity="bench", enabled=False,
                                                    leader=ctl.leader))  # fmt: skip
                tg.start_soon(poster.run)
                await ctl.cache.wait_synced()
                await ctl.fetch()
                started = time.monotonic()
                assert await ctl.reconcile(), "the initial apply failed"
                print(f"  initial apply of {count} objects: {time.monotonic() - started:.1f} s", flush=True)
                timings: dict[bool, list[float]] = {True: [], False: []}
                template = next(iter(sorted((work / "teams" / "team0").glob("t*.yaml"))))
                for i in range(rounds):
                    with_poster = i % 2 == 0
                    text = template.read_text()
                    template.write_text(text.replace("namespace:", f"labels: {{bench/round: r{i}}}\n  namespace:", 1)
                                        if "bench/round" not in text else
                                        text.replace(f"r{i - 1}", f"r{i}"))  # fmt: skip
                    revision = push(work, f"round {i}")
                    await ctl.fetch()
                    assert ctl.checkout is not None and ctl.checkout.revision == revision
                    ctl.poster = poster if with_poster else None
                    began = time.perf_counter()
                    ok = await ctl.reconcile()
                    timings[with_poster].append(time.perf_counter() - began)
                    assert ok, f"round {i} failed: {ctl.report.error}"
                    with anyio.fail_after(60):
                        await poster.idle()
                tg.cancel_scope.cancel()
        finally:
            await client.close()
    posted = len(api.received)
    states = [r.json()["state"] for r in api.received]
    with_p50 = statistics.median(timings[True]) * 1000
    without_p50 = statistics.median(timings[False]) * 1000
    print(f"  reconcile with a poster: p50 {with_p50:.1f} ms, without: p50 {without_p50:.1f} ms "
          f"({len(timings[True])} + {len(timings[False])} rounds); posts received: {posted} "
          f"({states.count('pending')} pending, {states.count('success')} success)")  # fmt: skip
    result(
        objects=count,
        rounds=rounds,
        latency_ms=round(latency * 1000),
        with_poster_p50_ms=round(with_p50, 1),
        without_poster_p50_ms=round(without_p50, 1),
        added_ms=round(with_p50 - without_p50, 1),
        submit_us=round(statistics.median(submits) * 1e6, 1),
        posts=posted,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=40, help="reconciles, alternating with and without (even)")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds the status API takes to answer")
    args = parser.parse_args()
    with sandbox() as sb, tempfile.TemporaryDirectory(prefix="fleet-bench-statuses-") as tmp:
        anyio.run(lambda: run(sb, Path(tmp), objects=args.objects, rounds=args.rounds, latency=args.latency))


if __name__ == "__main__":
    main()
