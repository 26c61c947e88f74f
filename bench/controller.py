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
- ``idle_requests``: requests the controller sent in 10 idle seconds (watches only: 0).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

import anyio
import anyio.to_thread
from common import result, sandbox
from diff import CLUSTER, write_repo

from fleet import kube
from fleet.controller import controllers, leaders
from fleet.sandbox import Sandbox
from fleet.source import GitSource

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


async def until(check: object, *, within: float = 600.0) -> float:
    started = time.monotonic()
    with anyio.fail_after(within):
        while True:
            if await check():  # type: ignore[operator]
                break
            await anyio.sleep(0.02)
    return time.monotonic() - started


async def run(sb: Sandbox, root: Path, *, objects: int, interval: float) -> None:
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
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    probe = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    source = GitSource(url=f"file://{bare}", ref="main", path="", cache_dir=root / "cache")
    options = controllers.Options(cluster=CLUSTER, interval=interval, health_timeout=300)
    ctl = controllers.Controller(client=client, source=source, options=options)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ctl.run)
            tg.start_soon(lambda: leaders.elect(client=client, cluster=CLUSTER, identity="bench", enabled=False,
                                                leader=ctl.leader))  # fmt: skip
            started = time.monotonic()
            await until(lambda: _applied(ctl, first))
            initial = time.monotonic() - started
            print(f"  initial apply of {count} objects      {initial:.2f} s")
            ctl.stats.max_loop_lag = 0.0

            # git runs in a worker thread: the benchmark must not stall the loop it measures.
            (work / "teams" / "team0" / "webhook.yaml").write_text(TEMPLATE.format(name="webhook"))
            await anyio.to_thread.run_sync(lambda: push(work, "a template, announced by a webhook"))
            pushed = time.monotonic()
            ctl.poke(reason="bench webhook")
            await until(lambda: exists(probe, "webhook"))
            webhook = time.monotonic() - pushed
            print(f"  webhook → applied                   {webhook:.2f} s")

            await anyio.sleep(interval * 0.5)  # a commit lands at a random point of the poll cycle
            (work / "teams" / "team0" / "polled.yaml").write_text(TEMPLATE.format(name="polled"))
            await anyio.to_thread.run_sync(lambda: push(work, "a template, found by polling"))
            pushed = time.monotonic()
            await until(lambda: exists(probe, "polled"))
            poll = time.monotonic() - pushed
            print(f"  commit → applied by polling ({interval:g} s)  {poll:.2f} s")
            lag = ctl.stats.max_loop_lag
            print(f"  worst event-loop lag meanwhile      {lag * 1000:.0f} ms")

            await anyio.sleep(3)
            before = client.counts.total
            await anyio.sleep(10)
            idle = client.counts.total - before
            print(f"  requests in 10 idle seconds         {idle}")
            tg.cancel_scope.cancel()
    finally:
        await client.close()
        await probe.close()
    result(objects=count, initial_s=f"{initial:.2f}", webhook_s=f"{webhook:.2f}", poll_s=f"{poll:.2f}",
           interval_s=f"{interval:g}", max_lag_s=f"{lag:.3f}", idle_requests=idle)  # fmt: skip


async def _applied(ctl: controllers.Controller, revision: str) -> bool:
    return ctl.report.applied == revision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args()
    with sandbox() as sb, tempfile.TemporaryDirectory(prefix="fleet-bench-controller-") as tmp:
        anyio.run(lambda: run(sb, Path(tmp), objects=args.objects, interval=args.interval))


if __name__ == "__main__":
    main()
