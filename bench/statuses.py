"""What posting a commit status adds to a reconcile (issue 24: ≤ 5 ms; it runs beside it).

A synthetic fleet (bench/diff.py's generator, ``--objects``, default 500) in a local
git repository; the controller in this process against a sandbox of its own, its watch
cache and Lease running, and its reconcile called directly for each new commit (a
commit changing one claim template), so the reconcile is timed alone. Rounds cycle
through three ways, measured in the same run on the same sandbox:

- *without* a commit status poster: the peer;
- *with* the controller's poster as configured (every reconcile hands over ``pending``
  and ``success``; the poster waits its 1 s debounce, so a reconcile shorter than that
  posts ``success`` alone, after it ended);
- *beside*: the poster with no debounce, so ``pending`` is posted while the reconcile
  runs: what a post costs the event loop when it does overlap (a reconcile longer than
  the debounce).

Statuses go to a loopback HTTP server shaped as GitHub's statuses API, answering after
``--latency`` seconds like a host across the internet. After each round the poster is
drained, so one round's posts never overlap the next round's reconcile.

Figures: the reconcile's median each way and the median of each cycle's difference to
the peer (``added_ms``: the goal, ≤ 5 ms; ``beside_added_ms``); the time ``submit`` takes
inside the reconcile (``submit_us``, per call); and ``loop_cpu_per_post_ms``, the CPU time
one post takes on the event loop's thread (200 posts one after another, less the loop's
own CPU time over as long without posts): the most a post running beside a reconcile
can take from it, measured as CPU time so that other load on the machine does not move it
as it moves wall times.
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
        posters = {"with": hosts.Poster(target=where, token_file=token), "beside": hosts.Poster(
            target=where, token_file=token, debounce=0.0)}  # fmt: skip
        submits: list[float] = []

        def timed(poster: hosts.Poster) -> None:
            submit = poster.submit

            def wrapped(status: hosts.CommitStatus) -> None:
                started = time.perf_counter()
                submit(status)
                submits.append(time.perf_counter() - started)

            poster.submit = wrapped  # type: ignore[method-assign]

        for poster in posters.values():
            timed(poster)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: ctl.cache.run(client=client))
                tg.start_soon(lambda: leaders.elect(client=client, cluster=CLUSTER, identity="bench", enabled=False,
                                                    leader=ctl.leader))  # fmt: skip
                for poster in posters.values():
                    tg.start_soon(poster.run)
                await ctl.cache.wait_synced()
                await ctl.intake.fetch()
                started = time.monotonic()
                assert await ctl.reconciler.reconcile(), "the initial apply failed"
                print(f"  initial apply of {count} objects: {time.monotonic() - started:.1f} s", flush=True)
                ways = ("without", "with", "beside")
                timings: dict[str, list[float]] = {way: [] for way in ways}
                template = next(iter(sorted((work / "teams" / "team0").glob("t*.yaml"))))
                for i in range(rounds):
                    way = ways[i % len(ways)]
                    text = template.read_text()
                    template.write_text(text.replace("namespace:", f"labels: {{bench/round: r{i}}}\n  namespace:", 1)
                                        if "bench/round" not in text else
                                        text.replace(f"r{i - 1}", f"r{i}"))  # fmt: skip
                    revision = push(work, f"round {i}")
                    await ctl.intake.fetch()
                    assert ctl.intake.checkout is not None and ctl.intake.checkout.revision == revision
                    ctl.reconciler.reporter.poster = posters.get(way)
                    began = time.perf_counter()
                    ok = await ctl.reconciler.reconcile()
                    timings[way].append(time.perf_counter() - began)
                    assert ok, f"round {i} failed: {ctl.report.error}"
                    with anyio.fail_after(60):
                        for poster in posters.values():
                            await poster.idle()
                posted = len(api.received)
                in_a_row = hosts.Poster(target=where, token_file=token, debounce=0.0, capacity=1000)
                tg.start_soon(in_a_row.run)
                cpu_per_post = await loop_cpu_per_post(in_a_row, count=200)
                assert len(api.received) == posted + 200, "every one of the 200 posts reached the server"
                tg.cancel_scope.cancel()
        finally:
            await client.close()
    states = [r.json()["state"] for r in api.received[:posted]]
    p50 = {way: statistics.median(values) * 1000 for way, values in timings.items()}
    added = {
        way: statistics.median(b - a for a, b in zip(timings["without"], timings[way], strict=False)) * 1000
        for way in ("with", "beside")
    }
    for way, values in timings.items():
        print(f"  reconcile {way:>7} a poster: p50 {p50[way]:.1f} ms, min {min(values) * 1000:.1f} ms, "
              f"max {max(values) * 1000:.1f} ms ({len(values)} rounds)")  # fmt: skip
    print(f"  posts received: {posted} ({states.count('pending')} pending, {states.count('success')} success); "
          f"then 200 posts in a row: {cpu_per_post * 1000:.2f} ms of the loop's CPU each")  # fmt: skip
    result(
        objects=count,
        rounds=rounds,
        latency_ms=round(latency * 1000),
        without_p50_ms=round(p50["without"], 1),
        with_p50_ms=round(p50["with"], 1),
        beside_p50_ms=round(p50["beside"], 1),
        added_ms=round(added["with"], 1),
        beside_added_ms=round(added["beside"], 1),
        submit_us=round(statistics.median(submits) * 1e6, 1),
        loop_cpu_per_post_ms=round(cpu_per_post * 1000, 2),
        posts=posted,
    )


async def loop_cpu_per_post(poster: hosts.Poster, *, count: int) -> float:
    """CPU seconds the event loop's thread spends per post (less its CPU over as long without posts)."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for i in range(count):
        poster.submit(hosts.CommitStatus(sha=f"{i:040x}", context="fleet/bench", state="success", description="x"))
    with anyio.fail_after(600):
        await poster.idle()
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    idle = time.thread_time()
    await anyio.sleep(wall)
    idle = time.thread_time() - idle
    return max(0.0, cpu - idle) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=60, help="reconciles, cycling without, with, beside")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds the status API takes to answer")
    args = parser.parse_args()
    with sandbox() as sb, tempfile.TemporaryDirectory(prefix="fleet-bench-statuses-") as tmp:
        anyio.run(lambda: run(sb, Path(tmp), objects=args.objects, rounds=args.rounds, latency=args.latency))


if __name__ == "__main__":
    main()
