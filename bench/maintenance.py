"""GPU maintenance: one phase's reconcile cost (1,000 nodes x 8 GPUs, 50 ms); eviction preview → diff (2 s).

Part 1, in-process, as the controller holds its inputs (``bench/disruptions.py``'s set-up): the
ResourceSlices of ``--nodes`` nodes x 8 GPUs (``bench.common.gpu_slices``, each with a
resourceVersion as the watch cache holds it; ``--tainted`` GPUs spread over the fleet carry the
driver's XID health taint), ``--claims`` allocated one-GPU claims (``bench.disruptions.claims``),
the Nodes in GPUNodePools of 100 and ``--objects`` other objects in the run's live index, and the
maintenance's rules live at ``None`` with the API server's eviction preview in their status. Timed:
what the walk's next phase (``None`` → ``NoSchedule``) adds to one reconcile in the engine, through
the production functions over a minimal ``syncstate.Run`` (plan, found, managed, memory, classing
reads): ``maintenancesteps.desired`` (the rules expanded over the live slices),
``maintenancesteps.excused`` (the classes gate's exemptions) and the stage's classing as
``applies.Sync.classify`` does it (``disruptions.classify``, then ``maintenancesteps.classify``) of
each rule's step. Not in it: the dry-run applies of the changed rules (API requests) and the
decisions. Maintenances of (a) one node, (b) a 100-node GPUNodePool, (c) every GPU with the XID
taint, fleet-wide, and beyond the target's three (d) two GPUs named by a CEL selector alone
(``uuid in [...]``), fleet-wide. "warm" keeps the controller's ``engine.Memory`` between runs,
"cold" has none, as a one-shot ``fleetctl``; "first" is the warm Memory's first run. Peer: the
disruption classing of a DeviceClass tightened past the A100s over the same claims and slices
(``disruptions.classify``, as ``bench/disruptions.py``). Best and median of ``--runs``, the peer and
every case alternating so load falls on all alike, the collector tuned as ``fleetctl`` tunes it
(``pipelines.tune_gc``) and the inputs frozen as the controller freezes what it keeps.

Part 2, a real sandbox (Kubernetes 1.37, KWOK): ``--sandbox-nodes`` GPU nodes x 8 GPUs; a fleet
repository with one team (``TEAM_NAMESPACES`` namespaces) is applied, then ``--pods`` pods, each
holding its own one-GPU ResourceClaim, are server-side applied 16 at a time and the real scheduler
allocates them (set-up, reported apart). The rounds start once the set-up's load has fallen
(``settle``). Each of ``--rounds`` rounds commits a GPUMaintenance of one node that holds claims and
runs ``fleetctl apply --prune`` (the rule written at ``None``; the previous round's rule pruned with
its file). A watch on the maintenance's DeviceTaintRules times the write (the rule stored:
``ADDED``) and the eviction controller's "would be evicted" condition in its status (the API
server's share); from the write, ``fleetctl diff -o json`` runs back to back until the rule's
disruption reason quotes it (what a person sees). Each ``fleetctl`` is a fresh process sharing one
plan cache, as a person's runs do. The peer: a fresh ``kubectl get`` of the rule, once the preview is
there. Then the parts of one diff, each timed alone: a fresh interpreter's imports, and the two
lists the maintenance stage reads. Last, the controller's path (``controller_rounds``): the
controller loop in this process, a maintenance committed and the controller poked as its webhook
does, timed from the rule's write to the preview in the FleetSync's ``status.maintenances``.

    .venv/bin/python bench/maintenance.py [--nodes 1000] [--claims 4000] [--runs 5] [--no-sandbox]
        [--sandbox-only] [--sandbox-nodes 1000] [--pods 4000] [--rounds 3] [--settle-timeout 300]
        [--profile FILE]
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.to_thread

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import gpu_slices, result, sandbox, until
from bench.disruptions import claims, device_class
from fleet import kube
from fleet.controller import controllers, leaders
from fleet.engine import (
    disruptions,
    evictions,
    ledgers,
    maintenances,
    maintenancesteps,
    memories,
    pipelines,
    plancaches,
    plans,
    syncstate,
)
from fleet.engine.changesets import Action, Change
from fleet.kube import Ref
from fleet.sandbox import Sandbox, binaries
from fleet.source import GitSource
from fleet.views import fleetsyncs

CLASS = "gpu.nvidia.com"
ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 50
TARGET_PREVIEW_S = 2.0
POOL_LABEL = "gpufleet.dev/pool"
POOL_SIZE = 100
XID = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
PREVIEW = (
    "{devices} published devices selected. {allocated} allocated device{s} selected. {pods} pod{ps} would be "
    "evicted in {namespaces} namespace{ns} if the effect was NoExecute. This information will not be updated "
    "again. Recreate the DeviceTaintRule to trigger an update."
)


# -- part 1: one phase's reconcile, in process ------------------------------------------------------


@dataclass
class Phase:
    """The part of a run (``syncstate.Run``) the maintenance stage reads: a fresh one per timed run."""

    plan: plans.Plan
    found: syncstate.Found
    reads: disruptions.Reads
    memory: memories.Memory | None = None
    managed: syncstate.Managed = field(default_factory=syncstate.Managed)

    def classing_reads(self) -> disruptions.Reads:
        return self.reads


def tainted_slices(nodes: int, tainted: int) -> list[dict[str, Any]]:
    """``gpu_slices(nodes)`` with ``tainted`` GPUs spread over the fleet carrying the driver's XID taint."""
    slices = gpu_slices(nodes)
    for i in range(tainted):
        item = slices[(i * len(slices)) // tainted + 17 % max(1, len(slices) // tainted)]
        item["spec"]["devices"][i % 8]["taints"] = [dict(XID)]
    for i, item in enumerate(slices):
        item["metadata"]["resourceVersion"] = str(1000 + i)  # as the watch cache holds them
    return slices


def live_nodes(slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Node per slice's node, labelled into GPUNodePools of ``POOL_SIZE`` in node order."""
    names = sorted({s["spec"]["nodeName"] for s in slices})
    return [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {POOL_LABEL: f"train-{i // POOL_SIZE}"}}}
        for i, n in enumerate(names)
    ]


def pool_rules(count: int) -> tuple[plans.PoolRule, ...]:
    return tuple(
        plans.PoolRule(
            name=f"train-{p}",
            selector={POOL_LABEL: f"train-{p}"},
            labels={},
            taints=(),
            nodes=POOL_SIZE,
            gpu_product="",
            gpus_per_node=8,
            source=f"pools/train-{p}.yaml:1:1",
        )
        for p in range(count)
    )


def other_objects(count: int) -> dict[str, dict[str, Any]]:
    """The rest of the run's live index: team objects (the maintenance stage scans the index for its kinds)."""
    out = {}
    for i in range(count):
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"o-{i}", "namespace": f"team-{i % 50}"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}},
        }
        out[Ref.of(body).key] = body
    return out


def maintenance(name: str, targets: plans.Targets) -> plans.MaintenanceRule:
    return plans.MaintenanceRule(
        name=name,
        targets=targets,
        reason="HBM errors, RMA 4711",
        api_version="resource.k8s.io/v1",
        source=f"maintenance/{name}.yaml:1:1",
    )


def previewed(rule: dict[str, Any], *, slices_by_pool: dict[str, int], held: list[dict[str, Any]]) -> dict[str, Any]:
    """``rule`` as the API server holds it once the eviction controller previewed it at None."""
    out = copy.deepcopy(rule)
    selector = out["spec"]["deviceSelector"]
    on = [
        c
        for c in held
        for r in c["status"]["allocation"]["devices"]["results"]
        if r["pool"] == selector["pool"] and (not selector.get("device") or r["device"] == selector["device"])
    ]
    devices = 1 if selector.get("device") else slices_by_pool.get(selector["pool"], 0)
    namespaces = len({c["metadata"]["namespace"] for c in on})
    message = PREVIEW.format(
        devices=devices,
        allocated=len(on),
        s="" if len(on) == 1 else "s",
        pods=len(on),
        ps="" if len(on) == 1 else "s",
        namespaces=namespaces,
        ns="" if namespaces == 1 else "s",
    )
    out["metadata"] |= {"generation": 1, "resourceVersion": "1", "uid": f"uid-{out['metadata']['name']}"}
    out["status"] = {
        "conditions": [
            {
                "type": "EvictionInProgress",
                "status": "False",
                "reason": "NoEffect",
                "observedGeneration": 1,
                "lastTransitionTime": "2026-12-07T12:00:00Z",
                "message": message,
            }
        ]
    }
    return out


@dataclass
class Scenario:
    name: str
    what: str
    rule: plans.MaintenanceRule
    live: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The rules at None with their preview, by live-index key."""


@dataclass
class Inputs:
    slices: list[dict[str, Any]]
    held: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    others: dict[str, dict[str, Any]]
    pools: tuple[plans.PoolRule, ...]
    teams: dict[str, tuple[str, ...]]

    def plan(self, rule: plans.MaintenanceRule | None) -> plans.Plan:
        return plans.Plan(
            cluster="bench",
            revision="r2",
            objects=(),
            pools=self.pools,
            teams=self.teams,
            maintenances=(rule,) if rule else (),
        )

    def phase(
        self, rule: plans.MaintenanceRule, live_rules: dict[str, dict[str, Any]], memory: memories.Memory | None
    ) -> Phase:
        live: dict[str, dict[str, Any]] = {Ref.of(n).key: n for n in self.nodes}
        live.update(self.others)
        live.update(live_rules)
        reads = disruptions.Reads(preloaded={disruptions.CLAIM: self.held, disruptions.SLICE: self.slices})
        found = syncstate.Found(ledger=ledgers.Ledger(cluster="bench"), live=live)
        return Phase(plan=self.plan(rule), found=found, reads=reads, memory=memory)


def run_of(phase: Phase) -> syncstate.Run:
    return cast(syncstate.Run, phase)


async def one_phase(phase: Phase) -> list[Change]:
    """What the maintenance's next phase runs in the engine (see the module's docstring)."""
    sync = run_of(phase)
    desired = await maintenancesteps.desired(sync)
    await maintenancesteps.excused(sync)
    changes = [
        Change(
            ref=d.ref,
            stage="maintenance",
            action=Action.CONFIGURED if d.ref.key in phase.found.live else Action.CREATED,
            before=phase.found.live.get(d.ref.key),
            after=d.body,
        )
        for d in desired
    ]
    classed = await disruptions.classify(changes, reads=phase.reads)
    return await maintenancesteps.classify(sync, classed)


def setup(inputs: Inputs, scenario: Scenario) -> None:
    """The scenario's rules as the earlier phase left them: at None, previewed by the API server."""
    first = anyio.run(maintenancesteps.desired, run_of(inputs.phase(scenario.rule, {}, None)))
    per_pool: dict[str, int] = {}
    for s in inputs.slices:
        per_pool[s["spec"]["pool"]["name"]] = per_pool.get(s["spec"]["pool"]["name"], 0) + len(s["spec"]["devices"])
    for d in first:
        assert d.body["spec"]["taint"]["effect"] == "None", d.body
        scenario.live[d.ref.key] = previewed(d.body, slices_by_pool=per_pool, held=inputs.held)


def in_process(args: argparse.Namespace) -> dict[str, Any]:
    slices = tainted_slices(args.nodes, args.tainted)
    held = claims(slices, args.claims)
    nodes = live_nodes(slices)
    inputs = Inputs(
        slices=slices,
        held=held,
        nodes=nodes,
        others=other_objects(args.objects),
        pools=pool_rules(len(nodes) // POOL_SIZE),
        teams={f"t{t}": (f"team-{t}",) for t in range(50)},
    )
    devices = sum(len(s["spec"]["devices"]) for s in slices)
    print(
        f"{len(nodes)} nodes in {len(inputs.pools)} pools, {len(slices)} slices, {devices} devices "
        f"({args.tainted} with the XID taint), {len(held)} allocated claims, {args.objects} other live objects"
    )
    uuids = [slices[n]["spec"]["devices"][d]["attributes"]["uuid"]["string"] for n, d in ((100, 3), (555, 5))]
    selector = f"device.attributes['{CLASS}'].uuid in {uuids!r}"
    scenarios = [
        Scenario("node", "one node", maintenance("node", plans.Targets(nodes=(nodes[7]["metadata"]["name"],)))),
        Scenario("pool", f"a {POOL_SIZE}-node pool", maintenance("pool", plans.Targets(pools=("train-3",)))),
        Scenario("xid", "XID-tainted GPUs, fleet-wide", maintenance("xid", plans.Targets(health_taints=(XID["key"],)))),
        Scenario("cel", "2 GPUs by CEL, fleet-wide", maintenance("cel", plans.Targets(selector=selector))),
    ]
    tightened = device_class(
        f"device.driver == '{CLASS}' && device.attributes['{CLASS}'].productName != 'NVIDIA A100-SXM4-80GB'"
    )
    revision = [
        Change(
            ref=Ref.of(tightened),
            stage="classes",
            action=Action.CONFIGURED,
            before=device_class(f"device.driver == '{CLASS}'"),
            after=tightened,
        )
    ]
    by_device = evictions.device_claims(held)
    pipelines.tune_gc()
    for s in scenarios:
        setup(inputs, s)
    kept = {s.name: memories.Memory() for s in scenarios}  # the controller's, one per scenario's cluster
    gc.collect()
    gc.freeze()  # what the controller keeps is out of the collector's sight (fleet.controller.heaps)

    def peer() -> list[Change]:
        reads = disruptions.Reads(preloaded={disruptions.CLAIM: held, disruptions.SLICE: slices})
        return anyio.run(lambda: disruptions.classify(revision, reads=reads))

    def phase(s: Scenario, memory: memories.Memory | None) -> tuple[float, list[Change]]:
        prepared = inputs.phase(s.rule, s.live, memory)  # the run's state, read before the stage
        gc.collect()
        started = time.perf_counter()
        classed = anyio.run(one_phase, prepared)
        return time.perf_counter() - started, classed

    # Round 0 loads CEL and fills each Memory (the controller's first run after a slice changed);
    # rounds 1..runs alternate the peer and every scenario, cold and warm, so load falls on all alike.
    first = {s.name: phase(s, kept[s.name])[0] for s in scenarios}
    peer()
    times: dict[str, list[float]] = {}
    found: dict[str, list[Change]] = {}
    for _ in range(args.runs):
        gc.collect()
        started = time.perf_counter()
        classed = peer()
        times.setdefault("peer", []).append(time.perf_counter() - started)
        found["peer"] = classed
        for s in scenarios:
            for mode, memory in (("cold", None), ("warm", kept[s.name])):
                took, classed = phase(s, memory)
                times.setdefault(f"{s.name}_{mode}", []).append(took)
                found[s.name] = classed

    figures: dict[str, Any] = {}
    print(
        f"\n{'one phase (None → NoSchedule)':32} {'rules':>5} {'claims':>6}   warm: best  median   "
        f"cold: best  median   first"
    )
    for s in scenarios:
        classed = found[s.name]
        assert classed and all(c.disruption is not None and not c.disruption.pending for c in classed), classed[:1]
        on = sum(len(evictions.claims_on(maintenances.target_of(c.after or {}), by_device)) for c in classed)
        warm, cold = times[f"{s.name}_warm"], times[f"{s.name}_cold"]
        print(
            f"{s.name + ': ' + s.what:32} {len(classed):>5} {on:>6}   {min(warm) * 1000:9.1f} "
            f"{statistics.median(warm) * 1000:7.1f}   {min(cold) * 1000:9.1f} {statistics.median(cold) * 1000:7.1f} "
            f"{first[s.name] * 1000:7.1f} ms"
        )
        figures |= {
            f"{s.name}_ms": round(min(warm) * 1000, 1),
            f"{s.name}_median_ms": round(statistics.median(warm) * 1000, 1),
            f"{s.name}_cold_ms": round(min(cold) * 1000, 1),
            f"{s.name}_rules": len(classed),
        }
    example = found["node"][0].disruption
    assert example is not None
    print(f"  e.g. {found['node'][0].ref.name}: {example.reason}")
    [entry] = found["peer"]
    assert entry.disruption is not None
    peer_best, peer_median = min(times["peer"]) * 1000, statistics.median(times["peer"]) * 1000
    print(
        f"peer: a DeviceClass tightened past the A100s, {len(entry.disruption.claims)} of {len(held)} claims "
        f"disrupted ({'disruptions.classify'}): best {peer_best:.1f} ms, median {peer_median:.1f} ms"
    )
    named = [s.name for s in scenarios[:3]]
    worst = max(figures[f"{n}_ms"] for n in named)
    figures |= {
        "peer_class_ms": round(peer_best, 1),
        "peer_class_median_ms": round(peer_median, 1),
        "worst_ms": worst,
        "ratio": round(worst / peer_best, 2),
        "target_ms": TARGET_MS,
        "load1": round(os.getloadavg()[0], 1),
    }
    if args.profile:
        s = scenarios[1]
        memory = memories.Memory()
        anyio.run(one_phase, inputs.phase(s.rule, s.live, memory))
        prepared = [inputs.phase(s.rule, s.live, memory) for _ in range(5)]
        profiler = cProfile.Profile()
        profiler.enable()
        for p in prepared:
            anyio.run(one_phase, p)
        profiler.disable()
        profiler.dump_stats(args.profile)
        print(f"profile of 5 runs of {s.name!r}: {args.profile}")
    return figures


# -- part 2: the eviction preview, on a real control plane ------------------------------------------

BENCH_CLASS = "bench.gpu.example.com"
CLUSTER = "bench"
TEAM_NAMESPACES = 10
FLEETCTL = "import sys; from fleetctl import cli; sys.exit(cli.run(sys.argv[1:]))"
EVICTED = "would be evicted"
SETTLED_LOAD = 4.0
CLOSED_WINDOW = '  maintenance:\n    windows:\n    - {schedule: "0 0 1 1 *", duration: 1h}\n'
DIFF_IMPORTS = (
    "import fleetctl.cli, fleetctl.commands.diff, fleet.engine.pipelines, fleet.engine.renders, "
    "fleet.manifests.revisions, fleet.policy, fleet.inventory.inventories"
)


def sandbox_pools(nodes: int) -> dict[str, int]:
    """Half H100, a quarter A100, the rest H200 nodes, 8 GPUs each (as ``bench/soak.py``)."""
    h100, a100 = nodes // 2, nodes // 4
    return {k: v for k, v in {"h100x8": h100, "a100x8": a100, "h200x8": nodes - h100 - a100}.items() if v}


def fleet_files(maintenance_of: tuple[str, str] | None, *, closed_window: bool = False) -> dict[str, str]:
    """One team (``TEAM_NAMESPACES`` namespaces), its DeviceClass, a 1.37 Cluster (``closed_window``: with
    a maintenance window that opens only on New Year's night, ``CLOSED_WINDOW``); and a GPUMaintenance
    ``(name, node)`` of one node."""
    namespaces = ", ".join(f"ml-{i}" for i in range(TEAM_NAMESPACES))
    files = {
        "fleet.yaml": f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: bench\n"
        f"spec:\n  clusters: [{CLUSTER}]\n",
        f"clusters/{CLUSTER}.yaml": "apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Cluster\nmetadata:\n"
        f'  name: {CLUSTER}\nspec:\n  kubernetesVersion: "1.37"\n' + (CLOSED_WINDOW if closed_window else ""),
        f"deviceclasses/{BENCH_CLASS}.yaml": f"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n"
        f"  name: {BENCH_CLASS}\nspec:\n  selectors:\n  - cel:\n      expression: \"device.driver == '{CLASS}'\"\n",
        "teams/ml/team.yaml": "apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Team\nmetadata:\n  name: ml\nspec:\n"
        f"  namespaces: [{namespaces}]\n  owners:\n  - kind: Group\n    name: ml\n  deviceClasses: [{BENCH_CLASS}]\n",
    }
    if maintenance_of is not None:
        name, node = maintenance_of
        files[f"maintenance/{name}.yaml"] = (
            "apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: GPUMaintenance\nmetadata:\n"
            f"  name: {name}\nspec:\n  devices: {{nodes: [{node}]}}\n  reason: HBM errors, RMA 4711\n"
        )
    return files


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    """The work tree holds exactly ``files``, committed (fleet reads revisions from git); its SHA."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    for path in repo.rglob("*.yaml"):
        path.unlink()
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com"}
    env |= {"GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", message], cwd=repo, env=env, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True)
    return head.stdout.strip()


def fleetctl(sb: Sandbox, cache: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``fleetctl ARGS`` in its own process, as a person runs it (its plan cache ``cache``); (result, wall s)."""
    env = {**os.environ, "KUBECONFIG": str(sb.kubeconfig), "PYTHONPATH": str(ROOT), "FLEET_CACHE_DIR": str(cache)}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", FLEETCTL, *args], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    return proc, time.monotonic() - started


def workload(count: int) -> list[dict[str, Any]]:
    """``count`` ResourceClaims of one GPU of the team's class, and a pod holding each, over the team's namespaces."""
    out: list[dict[str, Any]] = []
    for i in range(count):
        namespace, name = f"ml-{i % TEAM_NAMESPACES}", f"job-{i}"
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": BENCH_CLASS}}]}},
            }
        )
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "c", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}}],
                },
            }
        )
    return out


async def create_workload(sb: Sandbox, count: int, *, give_up: float) -> dict[str, Any]:
    """Server-side apply the claims and pods (16 at a time), then wait until the real scheduler has
    allocated every claim and KWOK runs every pod; what it took, and which nodes hold claims."""
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    limiter = anyio.CapacityLimiter(16)

    async def put(obj: dict[str, Any]) -> None:
        async with limiter:
            await client.apply(obj, field_manager="bench")

    try:
        started = time.monotonic()
        objects = workload(count)
        for kind in ("ResourceClaim", "Pod"):
            async with anyio.create_task_group() as tg:
                for obj in objects:
                    if obj["kind"] == kind:
                        tg.start_soon(put, obj)
        created = time.monotonic() - started
        claim_kind = await client.kind(api_version="resource.k8s.io/v1", kind="ResourceClaim")
        pod_kind = await client.kind(api_version="v1", kind="Pod")
        while True:
            claims = [c for c in (await client.list(claim_kind)).items if c["metadata"]["namespace"].startswith("ml-")]
            pods = [p for p in (await client.list(pod_kind)).items if p["metadata"]["namespace"].startswith("ml-")]
            allocated = [c for c in claims if (c.get("status") or {}).get("allocation")]
            running = sum((p.get("status") or {}).get("phase") == "Running" for p in pods)
            if len(allocated) >= count and running >= count:
                break
            if time.monotonic() - started > give_up:
                print(f"  gave up waiting: {len(allocated)} claims allocated, {running} pods running", flush=True)
                break
            await anyio.sleep(5)
        per_node: dict[str, int] = {}
        for c in allocated:
            for r in c["status"]["allocation"]["devices"]["results"]:
                per_node[r["pool"]] = per_node.get(r["pool"], 0) + 1
        return {
            "created_s": created,
            "ready_s": time.monotonic() - started,
            "allocated": len(allocated),
            "running": running,
            "per_node": per_node,
        }
    finally:
        await client.close()


def rule_entry(document: dict[str, Any], maintenance_name: str) -> dict[str, Any] | None:
    for e in document.get("entries") or ():
        obj = e.get("object") or {}
        if obj.get("kind") == "DeviceTaintRule" and str(obj.get("name", "")).startswith(f"{maintenance_name}."):
            return dict(e)
    return None


@dataclass
class Seen:
    """When the watch saw the rule stored, and its preview in the status (monotonic seconds)."""

    written: float | None = None
    previewed: float | None = None
    message: str = ""
    written_event: anyio.Event = field(default_factory=anyio.Event)
    previewed_event: anyio.Event = field(default_factory=anyio.Event)


async def watch_rule(client: kube.Client, label: str, seen: Seen, ready: anyio.Event) -> None:
    """Watch DeviceTaintRules of the maintenance ``label``: the stored write, then the preview."""
    params = {"watch": "true", "labelSelector": f"{maintenances.LABEL}={label}", "allowWatchBookmarks": "false"}
    async with client.stream(
        "GET", "/apis/resource.k8s.io/v1/devicetaintrules", verb="watch", params=params, read_timeout=None
    ) as response:
        ready.set()
        async for line in response.aiter_lines():
            if not line.strip():
                continue
            now = time.monotonic()
            event = json.loads(line)
            rule = event.get("object") or {}
            if event.get("type") == "ADDED" and seen.written is None:
                seen.written = now
                seen.written_event.set()
            found = evictions.preview(rule)
            if found is not None and found.current and EVICTED in found.message and seen.previewed is None:
                seen.previewed, seen.message = now, found.said
                seen.previewed_event.set()
                return


async def one_round(sb: Sandbox, repo: Path, cache: Path, name: str, node: str, *, limit: float) -> dict[str, Any]:
    """Commit the maintenance of ``node``, ``fleetctl apply`` it (the rule at None), and time the preview:
    in the rule's status (the watch) and in ``fleetctl diff -o json`` (polled back to back)."""
    commit(repo, fleet_files((name, node)), f"maintenance {name}")
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    seen, ready = Seen(), anyio.Event()
    diffs: list[tuple[float, float, bool, str]] = []  # (start, end, shown, reason)
    applied: dict[str, Any] = {}
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_rule, client, name, seen, ready)
            await ready.wait()

            async def apply() -> None:
                started = time.monotonic()
                proc, wall = await anyio.to_thread.run_sync(
                    lambda: fleetctl(sb, cache, "apply", str(repo), "--cluster", CLUSTER, "--prune", "-o", "json")
                )
                assert proc.returncode == 0, proc.stderr[-3000:]
                applied.update(start=started, end=started + wall)

            tg.start_soon(apply)
            with anyio.fail_after(limit):
                await seen.written_event.wait()
                while True:
                    started = time.monotonic()
                    proc, wall = await anyio.to_thread.run_sync(
                        lambda: fleetctl(sb, cache, "diff", str(repo), "--cluster", CLUSTER, "-o", "json")
                    )
                    assert proc.returncode in (0, 1), proc.stderr[-3000:]
                    entry = rule_entry(json.loads(proc.stdout), name) or {}
                    reason = str((entry.get("disruption") or {}).get("reason") or "")
                    diffs.append((started, started + wall, EVICTED in reason, reason))
                    if EVICTED in reason:
                        break
                await seen.previewed_event.wait()
            tg.cancel_scope.cancel()
    finally:
        await client.close()
    assert seen.written is not None and seen.previewed is not None
    # The peer: what a person types to read the preview raw, a fresh kubectl as each diff is fresh.
    started = time.monotonic()
    raw = sb.kubectl("get", "devicetaintrules", "-l", f"{maintenances.LABEL}={name}", "-o", "json")
    kubectl_s = time.monotonic() - started
    assert EVICTED in raw.stdout, raw.stdout[-2000:]
    shown = next(d for d in diffs if d[2])
    return {
        "node": node,
        "server_s": seen.previewed - seen.written,
        "diff_s": shown[1] - seen.written,
        "diff_wall_s": shown[1] - shown[0],
        "kubectl_s": kubectl_s,
        "diffs": len(diffs),
        "diff_started_after_preview_s": shown[0] - seen.previewed,
        "apply_after_write_s": applied["end"] - seen.written,
        "apply_s": applied["end"] - applied["start"],
        "message": seen.message,
        "reason": shown[3],
    }


async def fleetsync_preview(probe: kube.Client, name: str) -> str:
    """The preview ``status.maintenances`` of the bench cluster's FleetSync shows for maintenance ``name``."""
    try:
        found = await probe.get(fleetsyncs.ref(CLUSTER))
    except kube.NotFound:
        return ""
    for item in (found.get("status") or {}).get("maintenances") or ():
        if item.get("name") == name:
            return str(item.get("preview") or "")
    return ""


async def controller_rounds(
    sb: Sandbox, repo: Path, root: Path, nodes: list[str], *, limit: float
) -> list[dict[str, Any]]:
    """The controller's path: fleet-controller's loop runs in this process over ``repo`` (leading alone),
    the Cluster's maintenance window closed (so the rule stays at ``None`` and its preview in the status:
    with the window open the controller takes the devices out of scheduling on it at once). For each of
    ``nodes``: a commit without a maintenance (the last one's rules pruned), the controller idle at it,
    then a GPUMaintenance of the node committed and the controller poked (as its webhook does). Timed
    from the rule's write (the watch's ``ADDED``): the eviction controller's condition in the rule's
    status, and the preview in the FleetSync's ``status.maintenances`` (what ``kubectl``, the console
    and the metrics read), polled every 20 ms."""
    sb.kubectl("apply", "-f", str(ROOT / "overlays" / "base" / "fleetsync-crd.yaml"))
    sb.kubectl("wait", "--for=condition=Established", "crd/fleetsyncs.fleet.gpufleet.dev", "--timeout=60s")
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    probe = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    source = GitSource(url=f"file://{repo}", ref="main", path="", cache_dir=root / "controller-cache")
    options = controllers.Options(cluster=CLUSTER, interval=3600, health_timeout=600)
    store = plancaches.PlanCache(root / "state" / "plans")
    ctl = controllers.Controller(client=client, source=source, options=options, store=store)
    rounds: list[dict[str, Any]] = []

    async def idle_at(head: str) -> None:
        async def idle() -> bool:
            return ctl.report.applied == head and not ctl.report.reconciling and not len(ctl.queue)

        await until(idle)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ctl.run)
            tg.start_soon(
                lambda: leaders.elect(client=client, cluster=CLUSTER, identity="bench", enabled=True, leader=ctl.leader)
            )
            for i, node in enumerate(nodes):
                name = f"repair-controller-{i}"
                files = fleet_files(None, closed_window=True)
                head = await anyio.to_thread.run_sync(lambda: commit(repo, files, "no maintenance"))  # noqa: B023
                ctl.poke(reason="bench")
                await idle_at(head)
                seen, ready = Seen(), anyio.Event()
                out: dict[str, Any] = {"node": node}
                async with anyio.create_task_group() as watching:
                    watching.start_soon(watch_rule, probe, name, seen, ready)
                    await ready.wait()
                    await anyio.to_thread.run_sync(
                        lambda: commit(repo, fleet_files((name, node), closed_window=True), f"maintenance {name}")  # noqa: B023
                    )
                    committed = time.monotonic()
                    ctl.poke(reason="bench webhook")
                    with anyio.fail_after(limit):
                        await seen.written_event.wait()

                        async def shown() -> bool:
                            out["preview"] = await fleetsync_preview(probe, name)  # noqa: B023
                            return EVICTED in out["preview"]  # noqa: B023

                        await until(shown)
                        shown_at = time.monotonic()
                        await seen.previewed_event.wait()
                assert seen.written is not None and seen.previewed is not None
                rounds.append(
                    out
                    | {
                        "committed_to_write_s": seen.written - committed,
                        "server_s": seen.previewed - seen.written,
                        "status_s": shown_at - seen.written,
                        "after_server_s": shown_at - seen.previewed,
                    }
                )
            tg.cancel_scope.cancel()
    finally:
        await client.close()
        await probe.close()
    return rounds


def settle(*, limit: float, below: float = SETTLED_LOAD) -> float:
    """Wait until the 1-minute load average is under ``below``, at most ``limit`` seconds; the seconds
    waited. The set-up's tail (the scheduler, KWOK starting 4,000 pods, the lists polling them) lifts
    the average for minutes after it: rounds timed at once measured that, not the steady cluster."""
    started = time.monotonic()
    while os.getloadavg()[0] >= below and time.monotonic() - started < limit:
        time.sleep(5)
    return time.monotonic() - started


def diff_parts(sb: Sandbox, runs: int = 3) -> dict[str, Any]:
    """Where one ``fleetctl diff`` of the maintenance goes, in parts timed alone: a fresh interpreter
    importing what the diff imports, and the two lists its maintenance stage reads (medians)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    imports = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", DIFF_IMPORTS], check=True, env=env, cwd=ROOT)
        imports.append(time.monotonic() - started)
    return {"imports_s": statistics.median(imports), **anyio.run(lambda: lists(sb, runs))}


async def lists(sb: Sandbox, runs: int) -> dict[str, Any]:
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    out: dict[str, Any] = {}
    try:
        for name, key in (("slices", disruptions.SLICE), ("claims", disruptions.CLAIM)):
            kind = await client.kind(api_version=key[0], kind=key[1])
            took = []
            for _ in range(runs):
                started = time.monotonic()
                listed = await client.list(kind)
                took.append(time.monotonic() - started)
            out[name], out[f"list_{name}_s"] = len(listed.items), statistics.median(took)
            if name == "slices":
                out["slices_mib"] = len(json.dumps(listed.items)) / 2**20
    finally:
        await client.close()
    return out


def against_sandbox(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    pools = sandbox_pools(args.sandbox_nodes)
    started = time.monotonic()
    with sandbox(pools) as sb:
        up_s = time.monotonic() - started
        print(
            f"\npart 2 (sandbox): {args.sandbox_nodes} KWOK GPU nodes x 8 GPUs {pools} up in {up_s:.0f} s", flush=True
        )
        repo, cache = root / "repo", root / "cache"
        commit(repo, fleet_files(None), "the team")
        proc, _ = fleetctl(sb, cache, "apply", str(repo), "--cluster", CLUSTER)
        assert proc.returncode == 0, proc.stderr[-3000:]
        made = anyio.run(lambda: create_workload(sb, args.pods, give_up=args.setup_timeout))
        print(
            f"  {args.pods} claims and pods server-side applied in {made['created_s']:.0f} s; all allocated by the "
            f"scheduler and running in {made['ready_s']:.0f} s ({made['allocated']} allocated, {made['running']} "
            f"running, on {len(made['per_node'])} nodes); load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        nodes = sorted(made["per_node"], key=lambda n: (-made["per_node"][n], n))
        settled = settle(limit=args.settle_timeout)
        settled_load = os.getloadavg()[0]
        print(f"  settled: load {settled_load:.1f} after {settled:.0f} s", flush=True)
        rounds = []
        for r in range(args.rounds):
            node = nodes[r * 7 % len(nodes)]
            found = anyio.run(lambda: one_round(sb, repo, cache, f"repair-{r}", node, limit=args.round_timeout))  # noqa: B023
            rounds.append(found)
            print(
                f"  round {r + 1}: {node} ({made['per_node'][node]} claims): written → preview in the rule's status "
                f"{found['server_s']:.2f} s, → in fleetctl diff {found['diff_s']:.2f} s ({found['diffs']} diffs, "
                f"the one showing it {found['diff_wall_s']:.2f} s, started "
                f"{found['diff_started_after_preview_s']:+.2f} s after the preview; the peer, a fresh kubectl get "
                f"of the rule, {found['kubectl_s']:.2f} s); apply {found['apply_s']:.2f} s, "
                f"exited {found['apply_after_write_s']:.2f} s after the write; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        print(f"  the API server: {rounds[-1]['message']}")
        print(f"  fleetctl diff: {rounds[-1]['reason']}")
        parts = diff_parts(sb)
        print(
            f"  of one diff (medians of 3): the interpreter and fleetctl's imports {parts['imports_s']:.2f} s; "
            f"listing the {parts['slices']} ResourceSlices {parts['list_slices_s']:.2f} s "
            f"({parts['slices_mib']:.1f} MiB) and the {parts['claims']} ResourceClaims {parts['list_claims_s']:.2f} s, "
            f"which the maintenance stage reads; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        picked = [nodes[(r * 7 + 3) % len(nodes)] for r in range(args.rounds)]
        held = anyio.run(lambda: controller_rounds(sb, repo, root, picked, limit=args.round_timeout))
        for r, found in enumerate(held):
            print(
                f"  controller round {r + 1}: {found['node']}: commit poked → rule written "
                f"{found['committed_to_write_s']:.2f} s; written → preview in the rule's status "
                f"{found['server_s']:.2f} s, → in the FleetSync's status.maintenances {found['status_s']:.2f} s "
                f"({found['after_server_s']:+.2f} s after the rule's); load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        print(f"  FleetSync status.maintenances[].preview: {held[-1]['preview']}")
    server = statistics.median(r["server_s"] for r in rounds)
    shown = statistics.median(r["diff_s"] for r in rounds)
    return {
        "diff_imports_s": round(parts["imports_s"], 2),
        "diff_list_slices_s": round(parts["list_slices_s"], 2),
        "diff_list_claims_s": round(parts["list_claims_s"], 2),
        "sandbox_nodes": args.sandbox_nodes,
        "pods": args.pods,
        "allocated": made["allocated"],
        "setup_workload_s": round(made["ready_s"]),
        "preview_server_s": round(server, 2),
        "preview_diff_s": round(shown, 2),
        "preview_diff_max_s": round(max(r["diff_s"] for r in rounds), 2),
        "diff_wall_s": round(statistics.median(r["diff_wall_s"] for r in rounds), 2),
        "kubectl_wall_s": round(statistics.median(r["kubectl_s"] for r in rounds), 2),
        "diff_per_kubectl": round(
            statistics.median(r["diff_wall_s"] for r in rounds) / statistics.median(r["kubectl_s"] for r in rounds), 1
        ),
        "load1_rounds": round(settled_load, 1),
        "fleet_share_s": round(shown - server, 2),
        "controller_server_s": round(statistics.median(r["server_s"] for r in held), 2),
        "controller_status_s": round(statistics.median(r["status_s"] for r in held), 2),
        "controller_status_max_s": round(max(r["status_s"] for r in held), 2),
        "target_preview_s": TARGET_PREVIEW_S,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--claims", type=int, default=4000)
    parser.add_argument("--tainted", type=int, default=5, help="GPUs with the XID health taint, spread over the fleet")
    parser.add_argument("--objects", type=int, default=10_000, help="other live objects in the run's index")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", type=Path, default=None, help="write a cProfile of 5 runs of the pool phase")
    parser.add_argument("--no-sandbox", action="store_true", help="part 1 only")
    parser.add_argument("--sandbox-only", action="store_true", help="part 2 only")
    parser.add_argument("--sandbox-nodes", type=int, default=1000, help="KWOK GPU nodes of part 2")
    parser.add_argument("--pods", type=int, default=4000, help="pods of part 2, each with a one-GPU claim")
    parser.add_argument("--rounds", type=int, default=3, help="maintenances written and timed in part 2")
    parser.add_argument("--setup-timeout", type=float, default=1800.0, help="seconds the pods may take to run")
    parser.add_argument("--round-timeout", type=float, default=120.0, help="seconds one preview may take")
    parser.add_argument(
        "--settle-timeout", type=float, default=300.0, help="seconds to wait for the load to fall after the set-up"
    )
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.1f} at the start")
    figures: dict[str, Any] = {"nodes": args.nodes, "claims": args.claims}
    if not args.sandbox_only:
        figures |= in_process(args)
    if not args.no_sandbox:
        if binaries.locate() is None:
            binaries.build()
        with tempfile.TemporaryDirectory(prefix="fleet-bench-maintenance-") as tmp:
            figures |= against_sandbox(args, Path(tmp))
    figures["load1_end"] = round(os.getloadavg()[0], 1)
    result(**figures)


if __name__ == "__main__":
    main()
