"""fleet-controller latencies: commit → applied with a webhook and by polling, loop lag, idle requests.

A synthetic fleet (bench/diff.py's generator, ``--objects``, default 2,000) is pushed to
a local bare git repository and the controller loop (source, watches, queue, engine)
runs in this process against a sandbox of its own, leading alone. Figures:

- ``initial_s``: first commit pushed → FleetSync Ready (a full apply of the fleet);
- ``webhook_s``: a commit adding one claim template pushed, the webhook's call-back
  made (what ``/webhook`` does after verifying) → the template exists (issue: ≤ 2 s);
- ``poll_s``: the same without a webhook, polling every ``--interval`` seconds (issue:
  ≤ one interval + 2 s);
- ``max_lag_s``: the event loop's worst timer lag while those commits were parsed,
  validated and applied (CPU work runs in worker threads: this stays small);
- ``idle_requests``: requests the controller sent in 10 idle seconds (watches only: 0);
- ``drift_p50_s``/``drift_p99_s``: ``kubectl patch`` of the fleet's DeviceClass (the patch of
  issue 24: its selectors set to ``true``, field manager ``kubectl-patch``) → the selectors are
  git's again, under the default drift policy ``enforce``, ``--patches`` times (issue: p50 ≤ 1 s,
  p99 ≤ 3 s over 50), counted from kubectl's answer (and, as an upper bound that includes
  kubectl's own start-up and exit, from its start). Each patch waits until the controller is
  idle again (the repair's own write queues one more reconcile), so every patch is measured alone.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import functools
import gc
import os
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from types import FunctionType, ModuleType

import anyio
import anyio.to_thread
from common import peak_rss_mb, result, rss_mb, sandbox, until
from diff import CLUSTER, write_repo
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from fleet import kube
from fleet.controller import controllers, heaps, leaders
from fleet.engine import plancaches
from fleet.kube import leases
from fleet.sandbox import Sandbox
from fleet.source import GitSource
from fleet.telemetry import tracing

CRD = Path(__file__).resolve().parents[1] / "overlays" / "base" / "fleetsync-crd.yaml"
TEMPLATE = (
    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: {name}\n"
    "  namespace: bench-team0\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n"
    "        exactly:\n          deviceClassName: bench.gpu.example.com\n"
)


def git(cwd: Path, *args: str) -> str:
    argv = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", *args]
    return subprocess.run(argv, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def push(work: Path, message: str) -> str:
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message)
    git(work, "push", "-q", "origin", "main")
    return git(work, "rev-parse", "HEAD")


async def exists(client: kube.Client, name: str) -> bool:
    ref = kube.Ref(api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate", namespace="bench-team0", name=name)
    try:
        await client.get(ref)
        return True
    except kube.NotFound:
        return False


async def _found(spans: Spans, since: int) -> bool:
    return spans.fetch_after(since) is not None


class Lag:
    """The event loop's lag, sampled by a timer every ``every`` seconds (as the controller's own gauge)."""

    def __init__(self, every: float = 0.05) -> None:
        self.every = every
        self.samples: list[float] = []
        self.on = False
        self.rss: list[tuple[float, float]] = []
        """(seconds since the first sample, RSS MiB), once a second while sampling: where memory peaks."""

    async def run(self) -> None:
        began = time.monotonic()
        while True:
            start = time.monotonic()
            await anyio.sleep(self.every)
            if self.on:
                self.samples.append(max(0.0, time.monotonic() - start - self.every))
                if not self.rss or start - began - self.rss[-1][0] >= 1.0:
                    self.rss.append((start - began, rss_mb(os.getpid())))


class Spans(SpanExporter):
    """The finished spans the figures need, as (name, start ns, end ns, revision): where a commit's
    time went. Only those, and not the SDK's span objects: this exporter runs inside the process
    whose RSS is measured, and 10,000 objects applied make 10,000 spans."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, int, int, str]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for s in spans:
            if s.name in BREAKDOWN and s.start_time and s.end_time:
                revision = str((s.attributes or {}).get(tracing.REVISION, ""))
                self.spans.append((s.name, s.start_time, s.end_time, revision))
        return SpanExportResult.SUCCESS

    def fetched(self, revision: str, *, since: int) -> int | None:
        """Start (ns) of the first ``git fetch`` after ``since`` that brought ``revision``."""
        starts = [
            start for name, start, _, rev in self.spans if name == "git fetch" and start >= since and rev == revision
        ]
        return min(starts, default=None)

    def fetch_after(self, since: int) -> int | None:
        """Start (ns) of the first ``git fetch`` (any poll, new revision or not) that started after ``since``."""
        return min((start for name, start, _, _ in self.spans if name == "git fetch" and start >= since), default=None)

    def breakdown(self, since: int) -> dict[str, float]:
        """Seconds per span name (summed) among spans that started after ``since`` (ns)."""
        out: dict[str, float] = {}
        for name, start, end, _ in self.spans:
            if start >= since:
                out[name] = out.get(name, 0.0) + (end - start) / 1e9
        return out


BREAKDOWN = (
    "git fetch", "validate", "render", "reconcile", "read live", "apply stage", "apply object", "wait health", "prune"
)  # fmt: skip


def retained_mib(*roots: object, seen: set[int]) -> float:
    """MiB reachable from ``roots`` (``sys.getsizeof`` over ``gc.get_referents``), not counting what
    ``seen`` already holds (so parts measured one after another do not count shared objects twice),
    nor types, modules and functions. Allocator overhead and free heap are not in it."""
    total, stack = 0, list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, ModuleType, FunctionType)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total / 2**20


def outside_ctl(ctl: controllers.Controller) -> None:
    """Print what the controller object retains, and the largest types of what else is alive
    (gc-tracked objects the controller does not reach, with the strings and bytes they hold)."""
    seen: set[int] = set()
    print(f"  retained by the whole controller object: {retained_mib(ctl, seen=seen):.0f} MiB")
    gc.unfreeze()  # the controller freezes its long-lived objects (heaps): get_objects skips those
    mine = {id(seen)}
    by_type: dict[str, list[int]] = {}
    for obj in gc.get_objects():
        if id(obj) in seen or id(obj) in mine:
            continue
        entry = by_type.setdefault(type(obj).__name__, [0, 0])
        entry[0] += 1
        entry[1] += sys.getsizeof(obj)
        for ref in gc.get_referents(obj):
            if isinstance(ref, (str, bytes)) and id(ref) not in seen:
                seen.add(id(ref))
                entry[1] += sys.getsizeof(ref)
    top = sorted(by_type.items(), key=lambda kv: -kv[1][1])[:20]
    print("  alive outside the controller object, by type (count, MiB with their strings): "
          + ", ".join(f"{k} {n} {b / 2**20:.1f}" for k, (n, b) in top))  # fmt: skip


async def traced(ctl: controllers.Controller, events: int) -> None:
    """Trace allocations until the controller's watches have seen ``events`` events, then print the
    source lines holding the most live memory."""
    tracemalloc.start(8)
    while ctl.cache.events < events:  # noqa: ASYNC110 - the count is the controller's, not an event to wait on
        await anyio.sleep(0.05)
    snapshot = tracemalloc.take_snapshot()
    tracemalloc.stop()
    print(f"  live allocations after {events} watch events, by the line that made them:")
    for stat in snapshot.statistics("lineno")[:25]:
        print(f"    {stat.size / 2**20:7.1f} MiB {stat.count:8d}  {stat.traceback[0]}")
    print("  ... and by their innermost fleet frame:")
    sizes: dict[str, float] = {}
    for stat in snapshot.statistics("traceback"):
        frame = next((f for f in stat.traceback if "/fleet/" in f.filename), stat.traceback[0])
        key = f"{frame.filename.split('/fleet/')[-1]}:{frame.lineno}"
        sizes[key] = sizes.get(key, 0.0) + stat.size / 2**20
    for key, mib in sorted(sizes.items(), key=lambda kv: -kv[1])[:25]:
        print(f"    {mib:7.1f} MiB  fleet/{key}")


def rss_parts() -> str:
    """Anonymous (heap) and file-backed (shared libraries) resident memory of this process."""
    status = Path(f"/proc/{os.getpid()}/status").read_text().splitlines()
    return ", ".join(" ".join(line.split()) for line in status if line.startswith(("RssAnon", "RssFile")))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


DEVICE_CLASS = "bench.gpu.example.com"
PATCH = '{"spec":{"selectors":[{"cel":{"expression":"true"}}]}}'
GIT_EXPRESSION = "device.driver == 'gpu.nvidia.com'"


async def repaired(probe: kube.Client) -> bool:
    ref = kube.Ref(api_version="resource.k8s.io/v1", kind="DeviceClass", namespace="", name=DEVICE_CLASS)
    live = await probe.get(ref)
    return bool(live["spec"]["selectors"][0]["cel"]["expression"] == GIT_EXPRESSION)


async def drift_latency(sb: Sandbox, probe: kube.Client) -> tuple[float, float]:
    """``kubectl patch`` the DeviceClass (in a worker thread); seconds from the patch's answer until
    the probe reads git's selectors again, and from kubectl's start (an upper bound: it adds
    kubectl's own start-up and exit, while the controller may already be repairing)."""
    started = time.monotonic()
    await anyio.to_thread.run_sync(
        lambda: sb.kubectl("patch", "deviceclass", DEVICE_CLASS, "--type=merge", "-p", PATCH)
    )
    answered = time.monotonic()
    await until(lambda: repaired(probe), within=60)
    return time.monotonic() - answered, time.monotonic() - started


async def commit_latency(
    ctl: controllers.Controller, probe: kube.Client, work: Path, name: str, *, webhook: bool
) -> tuple[float, int, str]:
    """Push a commit adding template ``name``; (seconds until it exists in the cluster, when it was
    pushed in ns since the epoch, its SHA)."""
    (work / "teams" / "team0" / f"{name}.yaml").write_text(TEMPLATE.format(name=name))
    # git runs in a worker thread: the benchmark must not stall the loop it measures.
    sha = await anyio.to_thread.run_sync(lambda: push(work, f"template {name}"))
    pushed, pushed_ns = time.monotonic(), time.time_ns()
    if webhook:
        ctl.poke(reason="bench webhook")
    await until(lambda: exists(probe, name))
    return time.monotonic() - pushed, pushed_ns, sha


async def run(
    sb: Sandbox,
    root: Path,
    *,
    objects: int,
    commits: int,
    polled: int,
    interval: float,
    idle: float,
    patches: int = 50,
    profile: str = "",
    malloc_stats: bool = False,
    trace_at: float = 0.0,
) -> None:
    bare, work = root / "remote.git", root / "work"
    bare.mkdir()
    git(bare, "init", "-q", "--bare", "-b", "main")
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    git(work, "remote", "add", "origin", str(bare))
    count = write_repo(work, objects=objects)
    sb.kubectl("apply", "-f", str(CRD))
    sb.kubectl("wait", "--for=condition=Established", "crd/fleetsyncs.fleet.gpufleet.dev", "--timeout=60s")
    first = push(work, "the fleet")
    spans = Spans()
    tracing.setup(exporter="none", extra=spans)
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    probe = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    source = GitSource(url=f"file://{bare}", ref="main", path="", cache_dir=root / "cache")
    options = controllers.Options(cluster=CLUSTER, interval=interval, health_timeout=600)
    store = plancaches.PlanCache(root / "state" / "plans")  # as the overlay's controller keeps plans on disk
    ctl = controllers.Controller(client=client, source=source, options=options, store=store)
    lag = Lag()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ctl.run)
            tg.start_soon(lag.run)
            if trace_at:
                tg.start_soon(traced, ctl, int(trace_at))
            tg.start_soon(lambda: leaders.elect(client=client, cluster=CLUSTER, identity="bench", enabled=True,
                                                leader=ctl.leader))  # fmt: skip
            started = time.monotonic()
            lag.on = True
            await until(lambda: _applied(ctl, first), within=3600)
            initial = time.monotonic() - started
            lag.on = False
            initial_lag = list(lag.samples)
            spans.spans.clear()  # the benchmark's own span list is not the controller's memory
            print(f"  initial apply of {count} objects: {initial:.1f} s; loop lag p50 "
                  f"{pct(initial_lag, 0.5) * 1000:.0f} ms, p99 {pct(initial_lag, 0.99) * 1000:.0f} ms, "
                  f"max {max(initial_lag, default=0) * 1000:.0f} ms ({len(initial_lag)} samples)")  # fmt: skip
            step = max(1, len(lag.rss) // 60)
            print("  RSS during it (s: MiB): " + ", ".join(f"{t:.0f}: {m:.0f}" for t, m in lag.rss[::step]))

            lag.samples, lag.on = [], True
            profiler = cProfile.Profile() if profile else None
            if profiler:
                profiler.enable()  # the event loop's thread only: planning runs in worker threads
            hooked: list[float] = []
            parts: list[dict[str, float]] = []
            for i in range(commits):
                since = time.time_ns()
                hooked.append((await commit_latency(ctl, probe, work, f"webhook{i}", webhook=True))[0])
                await until(lambda: _idle(ctl))
                parts.append(spans.breakdown(since))
            if profiler:
                profiler.disable()
                profiler.dump_stats(profile)
                print(f"  cProfile of the event loop's thread during the webhook commits: {profile}")
            commit_lag = list(lag.samples)
            lag.on = False
            spans.spans.clear()
            print(f"  webhook → applied, {commits} commits: p50 {pct(hooked, 0.5):.2f} s, "
                  f"p99 {pct(hooked, 0.99):.2f} s, max {max(hooked, default=0):.2f} s")  # fmt: skip
            for name in BREAKDOWN:
                values = [p.get(name, 0.0) for p in parts]
                if any(values):
                    print(f"    {name:<14} median {pct(values, 0.5) * 1000:7.0f} ms  max {max(values) * 1000:7.0f} ms")

            drifts: list[float] = []
            bounds: list[float] = []
            before_repairs = _repairs(ctl)
            for _ in range(patches):
                after_answer, after_start = await drift_latency(sb, probe)
                drifts.append(after_answer)
                bounds.append(after_start)
                await until(lambda: _idle(ctl))
                await anyio.sleep(0.2)  # the reconcile the repair's own write queues, if it is not queued yet
                await until(lambda: _idle(ctl))
            counted = _repairs(ctl) - before_repairs
            print(f"  kubectl patch → repaired (enforce), {patches} patches of DeviceClass {DEVICE_CLASS}: "
                  f"p50 {pct(drifts, 0.5):.2f} s, p99 {pct(drifts, 0.99):.2f} s, max {max(drifts, default=0):.2f} s; "
                  f"fleet_drift_repaired_total counted {counted:g} (goal: p50 ≤ 1 s, p99 ≤ 3 s); "
                  f"from kubectl's start: p50 {pct(bounds, 0.5):.2f} s, p99 {pct(bounds, 0.99):.2f} s")  # fmt: skip

            polls: list[float] = []
            waits: list[float] = []  # push → the start of the poll's fetch that brought it
            cycles: list[float] = []  # the poll before the push → the poll that brought it (one cycle)
            offsets: list[float] = []  # the poll before the push → the push (its phase, plus git's time)
            # Each commit lands at a chosen point of the poll cycle, the points spread evenly over it
            # (stratified): a commit's wait for the poll is uniform over the interval, and 15 random
            # points would put the median wait anywhere in 5 ± 1.3 s (one standard deviation).
            phases = [(k + 0.5) / polled for k in range(polled)]
            random.shuffle(phases)
            for i, phase in enumerate(phases):
                mark = time.time_ns()
                await until(functools.partial(_found, spans, mark), within=3 * interval + 60)
                polled_at = spans.fetch_after(mark) or mark  # the start of the cycle's poll
                await anyio.sleep(max(0.0, (polled_at - time.time_ns()) / 1e9 + phase * interval))
                latency, pushed_ns, sha = await commit_latency(ctl, probe, work, f"polled{i}", webhook=False)
                polls.append(latency)
                found = spans.fetched(sha, since=pushed_ns)
                waits.append((found - pushed_ns) / 1e9 if found else float("nan"))
                cycles.append((found - polled_at) / 1e9 if found else float("nan"))
                offsets.append((pushed_ns - polled_at) / 1e9)
            print(f"  commit → applied by polling every {interval:g} s, {polled} commits: p50 {pct(polls, 0.5):.2f} s "
                  f"(goal ≤ {interval / 2 + 1:g} s), max {max(polls, default=0):.2f} s; each: "
                  f"{' '.join(f'{p:.1f}' for p in polls)}")  # fmt: skip
            print(f"    of which waiting for the poll: p50 {pct(waits, 0.5):.2f} s (uniform over the interval: "
                  f"{interval / 2:g} s); each: {' '.join(f'{w:.1f}' for w in waits)}")  # fmt: skip
            print(f"    poll cycles (one poll's start to the next): p50 {pct(cycles, 0.5):.2f} s, min "
                  f"{min(cycles, default=0):.2f} s, max {max(cycles, default=0):.2f} s "
                  f"(goal: {interval * 0.9:g}-{interval:g} s); "
                  f"pushed after the poll before (s): {' '.join(f'{o:.1f}' for o in offsets)}")  # fmt: skip

            await anyio.sleep(3)
            before = dict(client.counts.by_verb)
            await anyio.sleep(idle)
            sent = {v: n - before.get(v, 0) for v, n in client.counts.by_verb.items() if n != before.get(v, 0)}
            per_minute = sum(sent.values()) * 60 / idle if idle else 0.0
            print(f"  requests in {idle:g} idle seconds: {sent or 'none'} ({per_minute:.0f} per minute; "
                  f"the Lease is renewed every {leases.Timings().retry_period:g} s)")  # fmt: skip
            rss, now_rss = peak_rss_mb(), rss_mb(os.getpid())
            print(f"  RSS of this process (the controller with {count} objects, plus the benchmark's probe "
                  f"client): {now_rss:.0f} MiB now, {rss:.0f} MiB at peak")  # fmt: skip
            # What each resync period does (controllers._resync): cyclic garbage frozen while it was
            # still alive (the initial apply's) is collected, and the C heap trimmed.
            heaps.sweep()
            heaps.trim()
            swept_rss = rss_mb(os.getpid())
            print(f"  RSS after a resync's full collection and malloc_trim: {swept_rss:.0f} MiB")
            if malloc_stats:  # before the measurements below, which allocate
                print(f"  {rss_parts()}")
                ctypes.CDLL("libc.so.6").malloc_trim(0)
                print(f"  RSS after glibc's malloc_trim(0): {rss_mb(os.getpid()):.0f} MiB")
            seen: set[int] = set()
            parts_mib = {  # in this order: what a part shares with an earlier one counts there
                "watch cache (live objects)": retained_mib(ctl.cache.objects, seen=seen),
                "parsed repository and memos (LoadCache)": retained_mib(ctl.reconciler.plans.loads, seen=seen),
                "plan of the enforced revision": retained_mib(ctl.reconciler.plans.good, seen=seen),
                "unchanged-object memo (Settled)": retained_mib(ctl.reconciler.memory.settled, seen=seen),
            }
            print("  retained by the controller's long-lived parts (object sizes, no allocator overhead): "
                  + ", ".join(f"{k} {v:.0f} MiB" for k, v in parts_mib.items()))  # fmt: skip
            print("  context: Argo CD polls every 180 s by default, Flux's GitRepository every 1 min")
            if malloc_stats:
                outside_ctl(ctl)
                sys._debugmallocstats()  # pymalloc's arenas, used and free: how much of the RSS is fragmentation
            tg.cancel_scope.cancel()
    finally:
        await client.close()
        await probe.close()
    result(objects=count, initial_s=f"{initial:.1f}", initial_lag_p99_ms=f"{pct(initial_lag, 0.99) * 1000:.0f}",
           commits=commits, webhook_p50_s=f"{pct(hooked, 0.5):.2f}", webhook_p99_s=f"{pct(hooked, 0.99):.2f}",
           commit_lag_p99_ms=f"{pct(commit_lag, 0.99) * 1000:.0f}", polled=polled, interval_s=f"{interval:g}",
           poll_p50_s=f"{pct(polls, 0.5):.2f}", poll_wait_p50_s=f"{pct(waits, 0.5):.2f}",
           idle_requests_per_min=f"{per_minute:.0f}",
           patches=patches, drift_p50_s=f"{pct(drifts, 0.5):.2f}", drift_p99_s=f"{pct(drifts, 0.99):.2f}",
           drift_from_kubectl_start_p99_s=f"{pct(bounds, 0.99):.2f}",
           rss_mb=f"{now_rss:.0f}", peak_rss_mb=f"{rss:.0f}", swept_rss_mb=f"{swept_rss:.0f}",
           watch_cache_mib=f"{parts_mib['watch cache (live objects)']:.0f}",
           load_cache_mib=f"{parts_mib['parsed repository and memos (LoadCache)']:.0f}",
           argocd_poll_s=180, flux_interval_s=60)  # fmt: skip


def _repairs(ctl: controllers.Controller) -> float:
    """fleet_drift_repaired_total, summed over its labels."""
    return float(
        sum(
            sample.value
            for metric in ctl.metrics.reconciles.repaired.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        )
    )


async def _idle(ctl: controllers.Controller) -> bool:
    return len(ctl.queue) == 0 and not ctl.report.reconciling


async def _applied(ctl: controllers.Controller, revision: str) -> bool:
    return ctl.report.applied == revision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=50, help="commits announced by a webhook")
    parser.add_argument(
        "--polled", type=int, default=15, help="commits found by polling (at points spread evenly over the poll cycle)"
    )
    parser.add_argument("--interval", type=float, default=10.0, help="poll interval, seconds")
    parser.add_argument("--idle", type=float, default=60.0, help="idle seconds whose requests are counted")
    parser.add_argument(
        "--patches", type=int, default=50, help="kubectl patches of the DeviceClass, each repaired under enforce"
    )
    parser.add_argument("--profile", default="", help="write a cProfile of the webhook commits (loop thread) here")
    parser.add_argument(
        "--malloc-stats", action="store_true", help="print CPython's allocator statistics (to stderr) at the end"
    )
    parser.add_argument(
        "--tracemalloc",
        type=float,
        default=0.0,
        help="trace allocations from the start and print the largest live ones once the controller's watches "
        "have seen this many events (its initial apply under way; slow)",
    )
    args = parser.parse_args()
    with sandbox() as sb, tempfile.TemporaryDirectory(prefix="fleet-bench-controller-") as tmp:
        anyio.run(lambda: run(sb, Path(tmp), objects=args.objects, commits=args.commits, polled=args.polled,
                              interval=args.interval, idle=args.idle, patches=args.patches, profile=args.profile,
                              malloc_stats=args.malloc_stats, trace_at=args.tracemalloc))  # fmt: skip


if __name__ == "__main__":
    main()
