"""fleetctl diff vs kubectl diff --server-side (2,000 objects, 1% changed); no-op reconcile of 10,000 objects.

Part 1: a synthetic fleet of 2,000 objects (teams with namespaces, RBAC, quotas and
ResourceClaimTemplates) is committed to a git repository and applied, then 1% of the
templates get a new label in the work tree (an edit not yet committed, previewed). Both
tools diff the same changed objects against the same sandbox in the same run:
``fleetctl diff`` on the repository, ``kubectl diff --server-side`` on the objects
fleet renders (with the live revision annotation, so kubectl sees the same 1%).

``fleetctl diff`` is timed planning afresh (no stored plan: a CI runner, the first diff
after an edit; the headline ratio) and with the plan an earlier run of the same content
stored (``fleet.engine.plancaches``: a second look, or the diff before an apply).

Then where one diff's time goes, step by step: the imports (the third-party ones fleet needs,
then fleet's own for a stored-plan and for an afresh diff), each timed as its own fresh
``python -c``, and each later step timed alone in one fresh process (``--steps-child``).

Part 2: the fleet grows to 10,000 objects and is applied; then a second
``fleetctl apply`` runs with nothing to do. Its writes are counted by the API server
(``apiserver_request_total``), its requests by fleet's client, its peak memory by
the kernel (the process's VmHWM; see ``RUSAGE``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from common import result, sandbox

from fleet import engine, kube
from fleet.engine import ownership, stages
from fleet.engine.pipelines import load_plan
from fleet.sandbox import Sandbox, binaries
from tests import servermetrics as metrics

ROOT = Path(__file__).resolve().parents[1]
RESOURCES = stages.WRITTEN_RESOURCES
CLUSTER = "bench"
# The child's own peak: VmHWM of its address space. ru_maxrss is no good here: Linux carries it
# across fork and exec, so a child of a large process (this one, after applying thousands of
# objects) reports its parent's resident size, not its own.
RUSAGE = (
    "import sys; from fleetctl import cli; rc = cli.run(sys.argv[1:]); "
    "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')]; "
    "print('maxrss_kb', hwm[0], file=sys.stderr); sys.exit(rc)"
)


def write_repo(
    root: Path, *, objects: int, changed: int = 0, prefix: str = "bench", cluster: str = CLUSTER, per_file: int = 1
) -> int:
    """A fleet of about ``objects`` objects: 5 per team namespace (with the team's ServiceAccount), the rest
    templates. Returns the count.

    ``prefix`` names the namespaces (``<prefix>-team<N>``) and ``cluster`` the cluster (so its
    ledger), so two fleets can live side by side in one sandbox. ``per_file`` templates share a
    file (YAML documents): above 20,000 files the loader refuses a repository (``Limits``)."""
    teams = max(1, objects // 200)
    templates = objects - 1 - 5 * teams
    files = {
        "fleet.yaml": f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: bench\n"
        f"spec:\n  clusters: [{cluster}]\n",
        f"clusters/{cluster}.yaml": f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Cluster\nmetadata:\n"
        f'  name: {cluster}\nspec:\n  kubernetesVersion: "1.36"\n',
        f"deviceclasses/{prefix}.gpu.example.com.yaml": (
            f"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: {prefix}.gpu.example.com\n"
            "spec:\n  selectors:\n  - cel:\n      expression: \"device.driver == 'gpu.nvidia.com'\"\n"
        ),
    }
    for t in range(teams):
        files[f"teams/team{t}/team.yaml"] = (
            f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Team\nmetadata:\n  name: team{t}\nspec:\n"
            f"  namespaces: [{prefix}-team{t}]\n  owners:\n  - kind: Group\n    name: team{t}\n"
            f"  deviceClasses: [{prefix}.gpu.example.com]\n  quota:\n    {prefix}.gpu.example.com: 1000000\n"
        )
    for i in range(templates):
        t = i % teams
        label = '\n  labels:\n    bench/changed: "yes"' if i < changed else ""
        name = f"teams/team{t}/t{i}.yaml" if per_file == 1 else f"teams/team{t}/t{i // (per_file * teams)}.yaml"
        files[name] = (
            files.get(name, "")
            + ("---\n" if name in files else "")
            + (
                f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: t{i}\n"
                f"  namespace: {prefix}-team{t}{label}\nspec:\n  spec:\n    devices:\n      requests:\n"
                f"      - name: gpu\n        exactly:\n          deviceClassName: {prefix}.gpu.example.com\n"
                f"          count: {1 + i % 2}\n"
            )
        )
    for path in root.rglob("*.yaml"):
        path.unlink()
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return 1 + 5 * teams + templates


def commit(repo: Path) -> None:
    """Make ``repo`` a git work tree with its files committed (fleet reads revisions from git)."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com"}
    env |= {"GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fleet"]):
        subprocess.run(["git", *argv], cwd=repo, env=env, check=True)


async def apply_all(sb: Sandbox, repo: Path) -> engine.ChangeSet:
    plan = load_plan(repo, cluster=CLUSTER)
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    try:
        return await engine.reconcile(
            client=client, plan=plan, options=engine.Options(concurrency=32, prune=True, health_timeout=300)
        )
    finally:
        await client.close()


async def server_counts(sb: Sandbox) -> metrics.Counter[metrics.Key]:
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    try:
        return metrics.request_totals(await client.metrics())
    finally:
        await client.close()


def fleetctl(
    sb: Sandbox, *args: str, cache: Path | None = None, root: Path = ROOT
) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run fleetctl in its own process; (result, wall seconds, peak RSS MiB).

    ``cache`` is its plan cache (``FLEET_CACHE_DIR``); without one, none: every run plans afresh.
    ``root``: the checkout of fleet it runs (``--against``: a peer's, byte-compiled by ``compiled``),
    also its working directory: ``python -c`` puts the working directory first on ``sys.path``,
    ahead of ``PYTHONPATH``, so from this checkout's root a peer would run this checkout's code.
    """
    env = {**os.environ, "KUBECONFIG": str(sb.kubeconfig), "PYTHONPATH": str(root), "FLEET_CACHE_DIR": str(cache or "")}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", RUSAGE, *args], capture_output=True, text=True, env=env, cwd=root, check=False
    )
    wall = time.monotonic() - started
    rss = next((int(line.split()[1]) / 1024 for line in proc.stderr.splitlines() if line.startswith("maxrss_kb")), 0.0)
    return proc, wall, rss


def compiled(root: Path) -> Path:
    """``root`` (a peer checkout, ``--against``) with fleet byte-compiled, as ``bench/run`` compiles this one."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "fleet", "fleetctl"], cwd=root, check=True)
    return root


def kubectl_input(repo: Path, *, live_revision: str, out: Path) -> int:
    """The objects fleet renders, with the revision annotation live already has (as fleet's diff treats it)."""
    plan = load_plan(repo, cluster=CLUSTER)
    items = []
    for d in plan.objects:
        obj = json.loads(json.dumps(d.obj))
        obj["metadata"]["annotations"][ownership.REVISION] = live_revision
        items.append(obj)
    out.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return len(items)


# What a diff planned afresh imports from other projects (a stored-plan diff needs neither pydantic
# nor the CEL runtime), with fleet's own deferrals (fleet.kube.clients).
THIRD_PARTY = (
    "import sys; from fleet.exports import defer; sys.modules.setdefault('httpx._main', None); "
    "defer('httpx_ws', 'jsonpath', 'cryptography.x509'); "
    "import httpx, httpcore, kr8s.asyncio, pydantic, rich.console, rich.table, cel_expr_python.cel, yaml, "
    "ruamel.yaml, anyio, orjson, opentelemetry.trace, cachetools"
)
STORED_IMPORTS = "import fleetctl.cli, fleetctl.commands.diff, fleet.engine.pipelines"
AFRESH_IMPORTS = (
    f"{STORED_IMPORTS}, fleet.engine.renders, fleet.manifests.revisions, fleet.manifests.views, fleet.policy"
)


def import_times(runs: int = 3) -> dict[str, float]:
    """Median wall seconds of fresh processes that only import (the interpreter's start included)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = {}
    for name, code in (("third_party", THIRD_PARTY), ("stored", STORED_IMPORTS), ("afresh", AFRESH_IMPORTS)):
        times = []
        for _ in range(runs):
            started = time.monotonic()
            subprocess.run([sys.executable, "-c", code], check=True, env=env)
            times.append(time.monotonic() - started)
        out[name] = sorted(times)[len(times) // 2]
    return out


def steps_child(repo: Path, store_dir: Path) -> None:
    """Time each step of a diff alone (imports already done), print them as JSON: ``--steps-child``."""
    from fleet.engine import diffs, listings, pipelines, plancaches, renders
    from fleet.manifests.limits import Limits
    from fleet.manifests.revisions import load_revision
    from fleet.manifests.trees import loadable, read_tree
    from fleet.manifests.views import resolve
    from fleet.policy import validate
    from fleet.source import revision_id

    pipelines.tune_gc()  # as fleetctl does
    t: dict[str, float] = {}

    def timed(name: str, f: Any) -> Any:
        started = time.perf_counter()
        value = f()
        t[name] = time.perf_counter() - started
        return value

    store = plancaches.PlanCache(store_dir)

    async def cluster() -> listings.Prefetched:
        started = time.perf_counter()
        client = await kube.connect(timeout=60)
        t["connect"] = time.perf_counter() - started
        started, cpu = time.perf_counter(), time.process_time()
        prefetched = await listings.prefetch(client=client)
        t["list_wall"], t["list_cpu"] = time.perf_counter() - started, time.process_time() - cpu
        await client.close()
        return prefetched

    with pipelines.collector_paused():  # as fleetctl plans
        files, _ = timed("read_tree", lambda: read_tree(repo, limits=Limits()))
        sha = timed("revision_id", lambda: revision_id(repo, files=files, loadable=loadable))
        key = timed("plan_key", lambda: store.key(digest=pipelines._digest(files), cluster=CLUSTER, revision=sha))
        plan = timed("plan_from_disk", lambda: store.get(key))
        assert plan is not None, "the stored plan of this content is missing"
        loaded = timed("load", lambda: load_revision(files))
        timed("validate", lambda: validate(loaded, clusters=[CLUSTER]))
        timed("render", lambda: renders.plan(resolve(loaded, cluster=CLUSTER), revision=sha))
    prefetched = anyio.run(cluster)
    timed("no_dry_run_test", lambda: diffs._answers(list(plan.objects), prefetched.live, diffs._unchanged))
    print(json.dumps(t))


def diff_steps(sb: Sandbox, repo: Path, stored: Path) -> dict[str, float]:
    """``steps_child`` in a fresh process against the sandbox, with the stored plan of ``repo``."""
    env = {**os.environ, "KUBECONFIG": str(sb.kubeconfig), "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, __file__, "--steps-child", str(repo), str(stored / "plans")]
    return dict(json.loads(subprocess.run(argv, capture_output=True, text=True, env=env, check=True).stdout))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--steps-child":
        steps_child(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--noop-objects", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each diff (median reported)")
    parser.add_argument(
        "--against",
        type=Path,
        default=None,
        metavar="CHECKOUT",
        help="another checkout of fleet (a worktree at an earlier commit): its diff planned afresh is timed "
        "too, alternating with this tree's in the same sandbox",
    )
    args = parser.parse_args()
    peer = compiled(args.against.resolve()) if args.against else None
    if binaries.locate() is None:
        binaries.build()
    with sandbox({"h100x8": 1}) as sb, tempfile.TemporaryDirectory(prefix="fleet-bench-repo-") as tmp:
        repo = Path(tmp) / "repo"
        n = write_repo(repo, objects=args.objects)
        commit(repo)  # a checkout, as users diff: the 1% below is an edit not yet committed
        t = time.monotonic()
        first = anyio.run(apply_all, sb, repo)
        print(f"applied {n} objects in {time.monotonic() - t:.1f}s ({len(first.failed)} failed)")
        live_revision = first.revision
        changed = args.objects // 100
        write_repo(repo, objects=args.objects, changed=changed)
        listing = Path(tmp) / "rendered.json"
        kubectl_input(repo, live_revision=live_revision, out=listing)

        # Each run of "fleetctl diff" plans afresh (an empty plan cache: a CI runner, or the first
        # diff after an edit); "stored" runs find the plan an earlier run of the same content stored.
        stored = Path(tmp) / "stored"
        fleetctl(sb, "diff", str(repo), "--cluster", CLUSTER, cache=stored)
        fleet_times, stored_times, kubectl_times, peer_times = [], [], [], []
        fleet_changed = kubectl_changed = 0
        for i in range(args.runs):
            if peer is not None:
                proc, wall, _rss = fleetctl(
                    sb, "diff", str(repo), "--cluster", CLUSTER, cache=Path(tmp) / f"peer{i}", root=peer
                )
                assert proc.returncode == 1, proc.stderr[-2000:]
                peer_times.append(wall)
            proc, wall, _rss = fleetctl(sb, "diff", str(repo), "--cluster", CLUSTER, cache=Path(tmp) / f"empty{i}")
            assert proc.returncode == 1, proc.stderr[-2000:]
            fleet_times.append(wall)
            fleet_changed = proc.stdout.count("\n+++ merged ")
            proc, wall, _rss = fleetctl(sb, "diff", str(repo), "--cluster", CLUSTER, cache=stored)
            assert proc.returncode == 1 and proc.stdout.count("\n+++ merged ") == fleet_changed, proc.stderr[-2000:]
            stored_times.append(wall)
            started = time.monotonic()
            k = sb.kubectl(
                "diff", "--server-side", "--field-manager=fleet", "--force-conflicts", "-f", str(listing), check=False
            )
            kubectl_times.append(time.monotonic() - started)
            assert k.returncode == 1, k.stderr[-2000:]
            kubectl_changed = k.stdout.count("\n+++ ") + k.stdout.startswith("+++ ")
        fleet_s = sorted(fleet_times)[len(fleet_times) // 2]
        stored_s = sorted(stored_times)[len(stored_times) // 2]
        kubectl_s = sorted(kubectl_times)[len(kubectl_times) // 2]
        print(f"\n{'diff of ' + str(n) + ' objects, ' + str(changed) + ' changed (medians)':44} wall s   objects shown")
        print(f"{'fleetctl diff, planned afresh':44} {fleet_s:6.2f}   {fleet_changed}")
        print(f"{'fleetctl diff, stored plan':44} {stored_s:6.2f}   {fleet_changed}")
        print(f"{'kubectl diff --server-side':44} {kubectl_s:6.2f}   {kubectl_changed}")
        print(f"{'ratio (kubectl / fleetctl), planned afresh':44} {kubectl_s / fleet_s:6.1f}x")
        print(f"{'ratio (kubectl / fleetctl), stored plan':44} {kubectl_s / stored_s:6.1f}x")
        peer_figures: dict[str, float] = {}
        if peer_times:
            peer_s = sorted(peer_times)[len(peer_times) // 2]
            peer_figures = {"peer_fleetctl_diff_s": round(peer_s, 2), "peer_ratio": round(kubectl_s / peer_s, 1)}
            print(f"{'--against ' + str(peer) + ', planned afresh':44} {peer_s:6.2f}   {kubectl_s / peer_s:.1f}x")

        imports = import_times()
        steps = diff_steps(sb, repo, stored)
        print(f"\n{'where one diff goes (fresh processes)':44} seconds")
        print(f"{'interpreter + third-party imports (afresh)':44} {imports['third_party']:6.3f}")
        print(f"{'+ fleet, stored plan / afresh (all imports)':44} {imports['stored']:6.3f} / {imports['afresh']:.3f}")
        for name, value in steps.items():
            print(f"{'  ' + name.replace('_', ' '):44} {value:6.3f}")

        n_big = write_repo(repo, objects=args.noop_objects)
        t = time.monotonic()
        big = anyio.run(apply_all, sb, repo)
        print(f"\napplied {n_big} objects in {time.monotonic() - t:.1f}s ({len(big.failed)} failed)")
        before = anyio.run(server_counts, sb)
        proc, noop_s, rss = fleetctl(sb, "apply", str(repo), "--cluster", CLUSTER, "-o", "json", "--concurrency", "32")
        after = anyio.run(server_counts, sb)
        assert proc.returncode == 0, proc.stderr[-2000:]
        doc = json.loads(proc.stdout)
        client_requests = sum(doc["requests"].values())
        unchanged = sum(e["action"] == "unchanged" for e in doc["entries"])
        server_writes = metrics.writes(before, after, resources=RESOURCES)
        server_total = metrics.total(before, after, resources=RESOURCES)
        print(f"\nno-op fleetctl apply of {n_big} managed objects ({unchanged} unchanged)")
        print(f"  write requests (API server count)   {server_writes}")
        print(f"  API requests (client count)         {client_requests}  {doc['requests']}")
        print(f"  API requests (server count)         {server_total}")
        print(f"  wall time                           {noop_s:.2f}s")
        print(f"  peak RSS                            {rss:.0f} MiB")
        result(
            objects=n,
            changed=changed,
            fleetctl_diff_s=round(fleet_s, 2),
            kubectl_diff_s=round(kubectl_s, 2),
            ratio=round(kubectl_s / fleet_s, 1),
            fleetctl_diff_stored_s=round(stored_s, 2),
            ratio_stored=round(kubectl_s / stored_s, 1),
            **peer_figures,
            imports_third_party_s=round(imports["third_party"], 3),
            imports_stored_s=round(imports["stored"], 3),
            imports_afresh_s=round(imports["afresh"], 3),
            **{f"step_{k}_s": round(v, 3) for k, v in steps.items()},
            noop_objects=n_big,
            noop_writes=server_writes,
            noop_requests=client_requests,
            noop_s=round(noop_s, 2),
            noop_peak_rss_mb=round(rss),
        )


if __name__ == "__main__":
    main()
