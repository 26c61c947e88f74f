"""No-op reconcile: 10,000 objects warm (second run in one process, as the controller runs it); 100,000 cold.

Part 1: a fleet of 10,000 objects is applied. Then one process reconciles it twice,
the way the controller does on every poll: load the repository (with a
``pipelines.LoadCache`` kept between runs), connect, reconcile with prune, the live
objects coming from watches the process keeps open (``Watched``, as the controller's
cache: a reconcile lists only the ledger). The first run is cold (nothing cached),
the second warm. The process keeps one ``engine.Memory`` for all its runs too. Writes are counted by the API server
(``apiserver_request_total``), requests by fleet's client.

Part 2 (``--big``, default 100,000; 0 skips it): the fleet grows to that many objects
and is applied, then ``fleetctl apply --prune`` runs in a fresh process with nothing to
do, twice: with no stored plan (``big_cold``: loads the whole repository) and with the
plan the first run stored (``big_stored``: a restarted controller, a second run): wall time,
peak RSS (VmHWM) and server-counted writes of each.

Targets (issue 7): warm 10,000 ≤ 1 s wall with 0 writes; 100,000 cold ≤ 15 s, 0 writes,
peak RSS ≤ 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import anyio
from common import result, sandbox
from diff import CLUSTER, ROOT, apply_all, compiled, fleetctl, server_counts, write_repo

from fleet import engine, kube
from fleet.engine import listings, pipelines, stages
from fleet.kube.clients import WRITE_VERBS
from fleet.sandbox import Sandbox, binaries
from tests import servermetrics as metrics


class Watched:
    """Live objects of every kind fleet applies, kept current by one watch per kind (``kube.watch``):
    what the controller's cache gives each reconcile, so a reconcile lists nothing."""

    def __init__(self) -> None:
        self.live: dict[str, dict[str, object]] = {}
        self.kinds: set[tuple[str, str]] = set()
        self.synced: set[tuple[str, str]] = set()
        self.ready = anyio.Event()

    async def run(self, client: kube.Client) -> None:
        kinds = listings.staged_kinds()
        async with anyio.create_task_group() as tg:
            for api_version, kind in sorted(kinds):
                tg.start_soon(self._follow, client, await client.kind(api_version=api_version, kind=kind), len(kinds))

    async def _follow(self, client: kube.Client, kind: kube.Kind, total: int) -> None:
        key = (kind.api_version, kind.kind)
        fresh: dict[str, dict[str, object]] = {}
        async for event in kube.watch(client=client, kind=kind):
            ref = kube.Ref.of(event.object).key if event.object else ""
            if event.type == "LISTED":
                fresh[ref] = event.object
            elif event.type == "SYNCED":
                for k in [k for k, o in self.live.items() if (o["apiVersion"], o["kind"]) == key and k not in fresh]:
                    del self.live[k]
                self.live.update(fresh)
                fresh = {}
                self.kinds.add(key)
                self.synced.add(key)
                if len(self.synced) == total:
                    self.ready.set()
            elif event.type == "DELETED":
                self.live.pop(ref, None)
            else:
                self.live[ref] = event.object

    def prefetched(self) -> listings.Prefetched:
        return listings.Prefetched(kinds=set(self.kinds), live=dict(self.live))  # type: ignore[arg-type]


async def reconcile_once(
    client: kube.Client, repo: Path, cache: pipelines.LoadCache, watched: Watched, memory: engine.Memory
) -> dict[str, float]:
    """One controller-style reconcile; its wall time split into load and engine, and its counts.

    One client for the process, as the controller has (kr8s shares one session per
    kubeconfig and context: closing a second client would cut the watches)."""
    started = time.monotonic()
    before = client.counts.snapshot()
    plan = await anyio.to_thread.run_sync(lambda: pipelines.load_plan(repo, cluster=CLUSTER, cache=cache))
    loaded = time.monotonic()
    watches = client.counts.by_verb["watch"]
    changes = await engine.reconcile(
        client=client,
        plan=plan,
        options=engine.Options(concurrency=32, prune=True, health_timeout=300),
        prefetched=watched.prefetched(),
        memory=memory,
    )
    done = time.monotonic()
    assert not changes.failed, [e.error for e in changes.failed][:3]
    after = client.counts.snapshot()
    sent = {verb: n - before.get(verb, 0) for verb, n in after.items() if verb != "watch"}
    return {
        "wall": done - started,
        "load": loaded - started,
        "engine": done - loaded,
        "changed": len(changes.changed),
        "requests": sum(sent.values()) - (client.counts.by_verb["watch"] - watches),
        "client_writes": sum(n for verb, n in sent.items() if verb in WRITE_VERBS),
    }


def controller_runs(sb: Sandbox, repo: Path) -> tuple[dict[str, float], dict[str, float], int]:
    """Cold then warm reconcile in one process; the warm run's writes as the API server counted them."""

    async def main() -> tuple[dict[str, float], dict[str, float], int]:
        pipelines.tune_gc()
        cache = pipelines.LoadCache()
        watched = Watched()
        memory = engine.Memory()
        client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watched.run, client)
                await watched.ready.wait()
                cold = await reconcile_once(client, repo, cache, watched, memory)
                before = metrics.request_totals(await client.metrics())
                warm = await reconcile_once(client, repo, cache, watched, memory)
                after = metrics.request_totals(await client.metrics())
                tg.cancel_scope.cancel()
        finally:
            await client.close()
        return cold, warm, metrics.writes(before, after, resources=set(stages.WRITTEN_RESOURCES))

    return anyio.run(main)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--big", type=int, default=100_000, help="objects of the cold run (0: skip)")
    parser.add_argument(
        "--against",
        type=Path,
        default=None,
        metavar="CHECKOUT",
        help="another checkout of fleet (a worktree at an earlier commit): its cold run is timed too, "
        "before and after this tree's, on the same fleet",
    )
    args = parser.parse_args()
    peer = compiled(args.against.resolve()) if args.against else None
    if binaries.locate() is None:
        binaries.build()
    with sandbox({"h100x8": 1}) as sb, tempfile.TemporaryDirectory(prefix="fleet-bench-repo-") as tmp:
        repo = Path(tmp) / "repo"
        n = write_repo(repo, objects=args.objects)
        t = time.monotonic()
        first = anyio.run(apply_all, sb, repo)
        print(f"applied {n} objects in {time.monotonic() - t:.1f}s ({len(first.failed)} failed)", flush=True)
        cold, warm, writes = controller_runs(sb, repo)
        print(f"\nno-op reconcile of {n} objects in one process     wall s   load s   engine s   requests")
        for name, run in (("first (cold)", cold), ("second (warm)", warm)):
            print(f"  {name:44} {run['wall']:6.2f}   {run['load']:6.2f}   {run['engine']:8.2f}   {run['requests']:.0f}")
        print(f"  writes of the warm run (API server count)    {writes}")
        figures: dict[str, object] = {
            "objects": n,
            "cold_s": round(cold["wall"], 2),
            "warm_s": round(warm["wall"], 2),
            "warm_load_s": round(warm["load"], 2),
            "warm_engine_s": round(warm["engine"], 2),
            "warm_writes": writes,
            "warm_requests": int(warm["requests"]),
            "warm_target_s": 1,
            "warm_met": "yes" if warm["wall"] <= 1 and writes == 0 else "no",
        }
        if args.big:
            n_big = write_repo(repo, objects=args.big, per_file=10)
            t = time.monotonic()
            big = anyio.run(apply_all, sb, repo)
            print(f"\napplied {n_big} objects in {time.monotonic() - t:.1f}s ({len(big.failed)} failed)", flush=True)
            # Two fresh processes: the first plans (nothing stored), the second finds the plan the
            # first stored, as a restarted controller finds it in its state directory. With
            # --against, the peer's cold runs come before and after this tree's cold one.
            cache = Path(tmp) / "cache"
            runs = [("cold", "no stored plan", ROOT), ("stored", "the stored plan", ROOT)]
            if peer is not None:  # each peer run with a cache of its own: it plans afresh
                cold = ("no stored plan, --against " + str(peer), peer)
                runs = [("peer_cold", *cold), runs[0], ("peer_cold_again", *cold), runs[1]]
            for run, name, root in runs:
                before = anyio.run(server_counts, sb)
                proc, wall, rss = fleetctl(
                    sb,
                    "apply",
                    str(repo),
                    "--cluster",
                    CLUSTER,
                    "--prune",
                    "-o",
                    "json",
                    cache=Path(tmp) / run if run.startswith("peer") else cache,
                    root=root,
                )
                after = anyio.run(server_counts, sb)
                assert proc.returncode == 0, proc.stderr[-2000:]
                doc = json.loads(proc.stdout)
                writes = metrics.writes(before, after, resources=set(stages.WRITTEN_RESOURCES))
                print(f"\nno-op fleetctl apply --prune of {n_big} objects, fresh process, {name}")
                print(f"  wall time                           {wall:.2f}s")
                print(f"  peak RSS                            {rss:.0f} MiB")
                print(f"  write requests (API server count)   {writes}")
                print(f"  API requests (client count)         {sum(doc['requests'].values())}")
                figures.update(
                    {
                        f"big_{run}_s": round(wall, 2),
                        f"big_{run}_peak_rss_mb": round(rss),
                        f"big_{run}_writes": writes,
                        f"big_{run}_met": "yes" if wall <= 15 and rss <= 1024 and writes == 0 else "no",
                    }
                )
            figures["big_objects"] = n_big
        result(**figures)


if __name__ == "__main__":
    main()
