"""Many managed objects on the sandbox: sharded ledger, prune after removing 10%, no-op writes nothing.

The objects are ResourceClaimTemplates (the lightest kind fleet manages) in 100 team
namespaces, several per file. The suite runs 10,000 (several ledger shards per stage, within
the CI budget on 2 cores); ``FLEET_TEST_SCALE=100000`` runs the issue's 100,000, which takes
far longer than CI allows on this machine (the API server creates 20-300 objects/s here).
The namespaces are deleted at the end, so later tests do not list 90,000 templates.
Last, ``fleetctl apply --prune`` runs twice in fresh processes (no stored plan, then the
stored one) and must write nothing. With ``pytest -s`` each phase prints its wall time and
peak RSS: the figures of docs/benchmarks.md at 100,000.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from fleet import engine, kube
from fleet.engine import ledgers, ownership
from fleet.engine.pipelines import load_plan
from fleet.sandbox import Sandbox
from tests.apply.conftest import Engine, actions
from tests.apply.repos import Repo

SCALE = int(os.environ.get("FLEET_TEST_SCALE", "10000"))
pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.timeout(max(1500, SCALE * 0.09))]
TEAMS = 100
PER_FILE = 50


def _write(root: Path, *, cluster: str, device_class: str, templates: int, skip_every: int = 0) -> None:
    for path in sorted(root.rglob("*.yaml"), reverse=True):
        path.unlink()
    files = {
        "fleet.yaml": f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: scale\n"
        f"spec:\n  clusters: [{cluster}]\n",
        f"clusters/{cluster}.yaml": f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Cluster\nmetadata:\n"
        f'  name: {cluster}\nspec:\n  kubernetesVersion: "1.36"\n',
        f"deviceclasses/{device_class}.yaml": f"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n"
        f"  name: {device_class}\nspec:\n  selectors:\n  - cel:\n"
        "      expression: \"device.driver == 'gpu.nvidia.com'\"\n",
    }
    for t in range(TEAMS):
        files[f"teams/team{t}/team.yaml"] = (
            f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Team\nmetadata:\n  name: team{t}\nspec:\n"
            f"  namespaces: [{cluster}-team{t}]\n  owners:\n  - kind: Group\n    name: team{t}\n"
            f"  deviceClasses: [{device_class}]\n"
        )
    docs: dict[str, list[str]] = {}
    for i in range(templates):
        if skip_every and i % skip_every == 0:
            continue
        t = i % TEAMS
        docs.setdefault(f"teams/team{t}/t{i // (PER_FILE * TEAMS)}.yaml", []).append(
            f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: t{i}\n"
            f"  namespace: {cluster}-team{t}\nspec:\n  spec:\n    devices:\n      requests:\n"
            f"      - name: gpu\n        exactly:\n          deviceClassName: {device_class}\n"
        )
    files.update({rel: "---\n".join(parts) for rel, parts in docs.items()})
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _shard_sizes(fleet: Engine, cluster: str) -> list[int]:
    async def read(c: kube.Client) -> list[int]:
        kind = await c.kind(api_version="v1", kind="ConfigMap")
        items = (
            await c.list(kind, namespace=ledgers.NAMESPACE, label_selector=f"{ownership.CLUSTER_LABEL}={cluster}")
        ).items
        return [len((cm.get("data") or {}).get("entries", "").encode()) for cm in items]

    return fleet.run(read)


def test_100000_objects_sharded_ledger_prune_and_noop(sandbox: Sandbox, tmp_path: Path) -> None:
    repo = Repo(root=tmp_path / "repo", id=uuid.uuid4().hex[:6])
    fleet = Engine(sandbox, repo)
    cluster, device_class = repo.cluster, repo.device_class_name
    templates = SCALE - 1 - 4 * TEAMS  # namespace, ServiceAccount, role, binding per team (no quota); the class
    options: dict[str, Any] = {"concurrency": 64, "health_timeout": 600.0, "prune": True}
    try:
        _write(repo.root, cluster=cluster, device_class=device_class, templates=templates)
        started = time.monotonic()
        plan = fleet_plan(repo)
        _figure("load and plan", started)
        assert len(plan.objects) == 1 + 4 * TEAMS + templates
        started = time.monotonic()
        created = fleet.run(lambda c: engine.reconcile(client=c, plan=plan, options=engine.Options(**options)))
        _figure(f"first apply of {len(plan.objects)} objects", started)
        assert not created.failed and len(created.changed) == len(plan.objects)
        sizes = _shard_sizes(fleet, cluster)
        assert max(sizes) <= ledgers.MAX_SHARD_BYTES
        assert len(sizes) > sum(sizes) // ledgers.MAX_SHARD_BYTES + 1, "more than one shard where one would not do"

        _write(repo.root, cluster=cluster, device_class=device_class, templates=templates, skip_every=10)
        plan = fleet_plan(repo)
        started = time.monotonic()
        pruned = fleet.run(lambda c: engine.reconcile(client=c, plan=plan, options=engine.Options(**options)))
        _figure("apply with prune of 10%", started)
        deleted = {str(e.ref) for e in pruned.entries if e.action == engine.Action.DELETED}
        assert not pruned.failed
        assert deleted == {f"ResourceClaimTemplate {cluster}-team{i % TEAMS}/t{i}" for i in range(0, templates, 10)}
        ledger = fleet.run(lambda c: ledgers.load(client=c, cluster=cluster))
        assert ledger.entries.keys() == {d.ref.key for d in plan.objects}
        assert max(_shard_sizes(fleet, cluster)) <= ledgers.MAX_SHARD_BYTES

        result: list[engine.ChangeSet] = []
        started = time.monotonic()
        writes = fleet.server_writes(
            lambda: result.append(
                fleet.run(lambda c: engine.reconcile(client=c, plan=plan, options=engine.Options(**options)))
            )
        )
        _figure("no-op apply", started)
        sizes = _shard_sizes(fleet, cluster)
        print(f"ledger: {len(sizes)} shards, largest {max(sizes)} bytes, {sum(sizes)} bytes in all")
        assert writes == 0 and not result[0].changed
        assert set(actions(result[0]).values()) == {"unchanged"}

        # A fresh process, as after a controller restart or a user's later run: first with no
        # stored plan (loads the repository), then with the plan the first stored.
        store = tmp_path / "cache"
        runs: list[tuple[subprocess.CompletedProcess[str], float]] = []
        for run in ("cold, no stored plan", "cold, stored plan"):
            writes = fleet.server_writes(lambda: runs.append(_fleetctl(sandbox, repo, store)))
            proc, wall = runs[-1]
            assert proc.returncode == 0, proc.stderr[-2000:]
            assert writes == 0
            peak = next(int(ln.split()[1]) / 1024 for ln in proc.stderr.splitlines() if ln.startswith("maxrss_kb"))
            print(f"fleetctl apply --prune, {run}: {wall:.1f} s, peak RSS {peak:.0f} MiB, {writes} writes", flush=True)
    finally:
        names = [f"{cluster}-team{t}" for t in range(TEAMS)]
        sandbox.kubectl("delete", "namespace", "--wait=false", "--ignore-not-found", *names, check=False)


# The child's own peak: VmHWM of its address space. ru_maxrss is no good here: Linux carries it
# across fork and exec, so a child of a large process (this one, after applying thousands of
# objects) reports its parent's resident size (measured: 811 MiB reported by a child of 10 MiB).
RUSAGE = (
    "import sys; from fleetctl import cli; rc = cli.run(sys.argv[1:]); "
    "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')]; "
    "print('maxrss_kb', hwm[0], file=sys.stderr); sys.exit(rc)"
)


def _fleetctl(sandbox: Sandbox, repo: Repo, store: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """``fleetctl apply --prune`` in a process of its own (wall seconds; its peak RSS is on stderr)."""
    args = ["apply", str(repo.root), "--cluster", repo.cluster, "--prune", "--cache-dir", str(store), "-o", "json"]
    env = dict(os.environ, KUBECONFIG=str(sandbox.kubeconfig), NO_COLOR="1")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", RUSAGE, *args], capture_output=True, text=True, env=env, check=False)
    return proc, time.monotonic() - started


def _figure(what: str, started: float) -> None:
    """Print a phase's wall time and the process's peak RSS so far (shown with ``pytest -s``)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{what}: {time.monotonic() - started:.1f} s (peak RSS so far {peak:.0f} MiB)", flush=True)


def fleet_plan(repo: Repo) -> engine.Plan:
    return load_plan(repo.root, cluster=repo.cluster)
