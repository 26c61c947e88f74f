"""fleet-controller soak: RSS slope, cache sizes, errors, commits and repairs over --minutes of churn.

The real ``fleet-controller`` runs as its own process (so ``/proc/PID/status`` VmRSS is the
controller alone, no benchmark code or client in it) on a sandbox of its own, following a
local bare repository that declares GPUNodePools over ``--nodes`` KWOK GPU nodes (default
1,000), ``--teams`` teams (namespace, RBAC, device quota) and their claim templates. Once it
has applied the first commit, the run lasts ``--minutes`` (default 30) while:

- KWOK renews every node's Lease (``--node-lease-duration-seconds=40``; a kubelet renews its
  own every 10 s) and its ``node-heartbeat-with-lease`` stage rewrites each node's conditions
  (both periods are printed); on top of that this benchmark reports each node's status
  as a kubelet does when nothing changed (``nodeStatusReportFrequency``, 5 min: ``--heartbeat``),
  the nodes spread evenly over the period;
- a pod with a ResourceClaim from a template the fleet declares is created every
  ``--pod-every`` seconds in a team namespace, and the oldest deleted beyond ``--pods`` alive:
  the resourceclaim controller creates and deletes their claims, so the teams' ResourceQuota
  usage churns;
- every ``--commit-every`` seconds a commit relabels one template, is pushed, and is announced
  by a signed GitHub push webhook; applied = FleetSync ``lastAppliedRevision`` reaches it
  before the next commit;
- half a period later, ``kubectl patch`` changes a field fleet declares, in turn a
  DeviceClass's selectors, a team quota's ``spec.hard`` and a pool label on a Node; repaired =
  git's value is back before the next patch (under ``enforce``, the fleet's default);
- every ``--sample`` seconds the controller's VmRSS is read and its ``/metrics`` scraped:
  every ``fleet_cache_entries{cache=...}`` series present (``caches=none`` if there is none)
  and ``fleet_reconcile_duration_seconds_count`` by result.

The samples after ``--warmup`` minutes (default 10 % of the run, at least 1) give the RSS at
the warm-up's end and at the end, the least-squares slope in MiB/hour, the growth, the
extrapolation to 30 days and the day the Deployment's memory limit (read from
``overlays/base/controller.yaml``) would be reached at that slope. A cache is flat when its
least-squares line rises by at most 2 % of its first value (at least 2 entries) over the
window. Reconcile errors are the non-``success`` reconciles of the controller's whole life;
the log's ERROR and "reconcile failed" lines are counted beside them. Nothing here fails for
a missed target: the figures are reported.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import hmac
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
from common import result, rss_mb, sandbox
from prometheus_client.parser import text_string_to_metric_families
from ruamel.yaml import YAML

from fleet import kube
from fleet.sandbox import Sandbox, binaries, clusters, gpus, processes

ROOT = Path(__file__).resolve().parents[1]
CRD = ROOT / "overlays" / "base" / "fleetsync-crd.yaml"
DEPLOYMENT = ROOT / "overlays" / "base" / "controller.yaml"
CLUSTER = "soak"
CLASS = "soak.gpu.example.com"
SELECTOR = "device.driver == 'gpu.nvidia.com'"
QUOTA_KEY = f"{CLASS}.deviceclass.resource.k8s.io/devices"
QUOTA = 1000
QUOTA_PATCH = json.dumps({"spec": {"hard": {QUOTA_KEY: str(QUOTA + 1)}}})
COMMIT_LABEL = "soak.example.com/commit"
POOL_LABEL = "gpufleet.dev/pool"
SECRET = b"soak-webhook-secret"
POOLS = {"h100x8": "h100", "a100x8": "a100", "h200x8": "h200"}
"""Sandbox pool key → the GPUNodePool (and the GPU model) that selects its nodes."""


# -- the fleet repository -------------------------------------------------------------------


def pool_counts(nodes: int) -> dict[str, int]:
    """Sandbox pool key → node count: half H100, a quarter A100, the rest H200."""
    h100, a100 = nodes // 2, nodes // 4
    return {"h100x8": h100, "a100x8": a100, "h200x8": nodes - h100 - a100}


def fleet_files(*, counts: dict[str, int], teams: int, templates: int) -> dict[str, str]:
    """The fleet: its Cluster, one DeviceClass, a GPUNodePool per sandbox pool, teams and templates."""
    files = {
        "fleet.yaml": "apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: soak\nspec:\n"
        f"  defaults:\n    driftPolicy: enforce\n    prune: true\n  clusters: [{CLUSTER}]\n",
        f"clusters/{CLUSTER}.yaml": "apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Cluster\nmetadata:\n"
        f'  name: {CLUSTER}\nspec:\n  kubernetesVersion: "1.36"\n',
        f"deviceclasses/{CLASS}.yaml": f"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n"
        f'  name: {CLASS}\nspec:\n  selectors:\n  - cel:\n      expression: "{SELECTOR}"\n',
    }
    for key, count in counts.items():
        if not count:
            continue
        name = POOLS[key]
        model = gpus.MODELS[name]
        files[f"pools/{name}.yaml"] = (
            f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: GPUNodePool\nmetadata:\n  name: {name}\nspec:\n"
            f"  nodeSelector:\n    node.kubernetes.io/instance-type: {model.instance_type}\n"
            f"  labels:\n    {POOL_LABEL}: {name}\n"
            "  taints:\n  - key: nvidia.com/gpu\n    value: present\n    effect: NoSchedule\n"
            f"  gpu:\n    productName: {model.product_name}\n    count: 8\n    memory: {model.memory}\n"
            f"  nodes: {count}\n"
        )
    for t in range(teams):
        files[f"teams/team{t}/team.yaml"] = (
            f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Team\nmetadata:\n  name: team{t}\nspec:\n"
            f"  namespaces: [soak-team{t}]\n  owners:\n  - kind: Group\n    name: team{t}\n"
            f"  deviceClasses: [{CLASS}]\n  quota:\n    {CLASS}: {QUOTA}\n"
        )
        files[f"teams/team{t}/one-gpu.yaml"] = template("one-gpu", team=t, count=1)
    for i in range(templates):
        files[f"teams/team{i % teams}/t{i}.yaml"] = template(f"t{i}", team=i % teams, count=1 + i % 2)
    return files


def template(name: str, *, team: int, count: int, commit: int | None = None) -> str:
    label = f'\n  labels:\n    {COMMIT_LABEL}: "{commit}"' if commit is not None else ""
    return (
        f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: {name}\n"
        f"  namespace: soak-team{team}{label}\nspec:\n  spec:\n    devices:\n      requests:\n"
        f"      - name: gpu\n        exactly:\n          deviceClassName: {CLASS}\n          count: {count}\n"
    )


def git(cwd: Path, *args: str) -> str:
    argv = ["git", "-c", "user.name=soak", "-c", "user.email=soak@example.com", *args]
    return subprocess.run(argv, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def push(work: Path, message: str) -> str:
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message)
    git(work, "push", "-q", "origin", "main")
    return git(work, "rev-parse", "HEAD")


def kwok_heartbeat() -> str:
    """The delay of KWOK's node heartbeat stage as the sandbox runs it (``tools/kwokstages``)."""
    found = binaries.locate()
    if found is None:
        return "unknown"
    for doc in YAML(typ="safe", pure=True).load_all(found.kwok_stages.read_text()):
        if "heartbeat" in str(((doc or {}).get("metadata") or {}).get("name", "")):
            delay = (doc.get("spec") or {}).get("delay") or {}
            low = delay.get("durationMilliseconds", 0) / 1000
            high = max(low, delay.get("jitterDurationMilliseconds", 0) / 1000)
            return f"{doc['metadata']['name']} every {low:g}-{high:g} s"
    return "none"


def memory_limit_mib() -> float:
    """The controller Deployment's memory limit in overlays/base, in MiB."""
    for doc in YAML(typ="safe", pure=True).load_all(DEPLOYMENT.read_text()):
        if (doc or {}).get("kind") == "Deployment":
            for container in doc["spec"]["template"]["spec"]["containers"]:
                limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
                if limit:
                    return quantity(str(limit)) / 2**20
    raise SystemExit(f"error: no memory limit in {DEPLOYMENT}; the soak reports against it (exit 2)")


def quantity(text: str) -> float:
    """A Kubernetes quantity (``768Mi``, ``1k``) as a number."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


# -- what the run records -------------------------------------------------------------------


@dataclass
class Sample:
    at: float
    """Seconds since the soak started (the first commit applied)."""
    rss: float
    caches: dict[str, float]
    reconciles: dict[str, float]
    """fleet_reconcile_duration_seconds_count by result."""


@dataclass
class Tally:
    samples: list[Sample] = field(default_factory=list)
    scrape_errors: int = 0
    commits_made: int = 0
    commits_applied: int = 0
    commit_latencies: list[float] = field(default_factory=list)
    patches_made: int = 0
    patches_repaired: int = 0
    repair_latencies: list[float] = field(default_factory=list)
    unrepaired: list[str] = field(default_factory=list)
    in_flight: list[str] = field(default_factory=list)
    """A commit or patch made whose wait the run's end cut short: in neither count."""
    pods_created: int = 0
    pods_deleted: int = 0
    pod_errors: int = 0
    heartbeats: int = 0
    heartbeat_errors: int = 0
    lease_node: str = ""
    lease_renewals: set[str] = field(default_factory=set)
    """The distinct ``renewTime`` values one node's Lease showed at the samples."""


def scrape(text: str) -> tuple[dict[str, float], dict[str, float], float, float]:
    """(cache → entries, result → reconciles, seconds all reconciles took, fleet_drift_repaired_total)
    from a /metrics page."""
    caches: dict[str, float] = {}
    reconciles: dict[str, float] = {}
    seconds = repaired = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "fleet_cache_entries":
                caches[s.labels.get("cache", "")] = s.value
            elif s.name == "fleet_reconcile_duration_seconds_count":
                reconciles[s.labels.get("result", "")] = s.value
            elif s.name == "fleet_reconcile_duration_seconds_sum":
                seconds += s.value
            elif s.name == "fleet_drift_repaired_total":
                repaired += s.value
    return caches, reconciles, seconds, repaired


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per hour; 0 with fewer than two points."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx * 3600


def flat(points: list[tuple[float, float]]) -> bool:
    """The least-squares line rises by at most 2 % of the first value (≥ 2 entries) over the window."""
    if len(points) < 2:
        return True
    rise = slope_per_hour(points) / 3600 * (points[-1][0] - points[0][0])
    return rise <= max(0.02 * points[0][1], 2.0)


# -- the churn ------------------------------------------------------------------------------


async def heartbeats(client: kube.Client, nodes: list[str], *, period: float, tally: Tally) -> None:
    """Report every node's status once per ``period``, evenly spread, as a kubelet with nothing new
    to say does every ``nodeStatusReportFrequency``: the Ready condition with a new heartbeat time."""
    gap = period / max(1, len(nodes))
    while True:
        for name in nodes:
            started = time.monotonic()
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            body = {
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": now,
                        }
                    ]
                }
            }
            try:
                await client.request(
                    "PATCH",
                    f"/api/v1/nodes/{name}/status",
                    verb="patch",
                    body=body,
                    content_type="application/strategic-merge-patch+json",
                )
                tally.heartbeats += 1
            except kube.KubeError:
                tally.heartbeat_errors += 1
            await anyio.sleep(max(0.0, gap - (time.monotonic() - started)))


def pod(name: str, *, team: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": f"soak-team{team}", "labels": {"app": "soak"}},
        "spec": {
            "containers": [{"name": "work", "image": "soak.invalid/work", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 0,
        },
    }


async def pods(client: kube.Client, *, teams: int, every: float, alive: int, tally: Tally) -> None:
    """Create a pod with a claim every ``every`` seconds, round the teams; delete the oldest beyond ``alive``."""
    live: deque[kube.Ref] = deque()
    n = 0
    try:
        while True:
            started = time.monotonic()
            obj = pod(f"soak-{n}", team=n % teams)
            n += 1
            try:
                await client.create(obj, field_manager="soak")
                live.append(kube.Ref.of(obj))
                tally.pods_created += 1
            except kube.KubeError as err:
                tally.pod_errors += 1
                print(f"  pod create failed: {err.what}", flush=True)
            while len(live) > alive:
                await _delete_pod(client, live.popleft(), tally)
            await anyio.sleep(max(0.0, every - (time.monotonic() - started)))
    finally:
        with anyio.CancelScope(shield=True):
            while live:
                await _delete_pod(client, live.popleft(), tally)


async def _delete_pod(client: kube.Client, ref: kube.Ref, tally: Tally) -> None:
    try:
        await client.delete(ref)
        tally.pods_deleted += 1
    except kube.NotFound:
        pass
    except kube.KubeError as err:
        tally.pod_errors += 1
        print(f"  pod delete failed: {err.what}", flush=True)


FLEETSYNC = kube.Ref(api_version="fleet.gpufleet.dev/v1alpha1", kind="FleetSync", namespace="", name=CLUSTER)


async def applied_revision(client: kube.Client) -> str:
    try:
        live = await client.get(FLEETSYNC)
    except kube.KubeError:
        return ""
    return str((live.get("status") or {}).get("lastAppliedRevision") or "")


async def announce(http: httpx.AsyncClient, url: str, sha: str) -> int:
    """A GitHub push webhook for ``sha`` to ``url``, signed with the controller's secret; the HTTP status."""
    body = json.dumps(
        {"ref": "refs/heads/main", "after": sha, "repository": {"default_branch": "main"}, "pusher": {"name": "soak"}}
    ).encode()
    signature = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": signature,
    }
    response = await http.post(url, content=body, headers=headers)
    return response.status_code


async def commits(
    client: kube.Client, http: httpx.AsyncClient, *, work: Path, url: str, every: float, tally: Tally
) -> None:
    """Every ``every`` seconds: relabel template ``commits`` of team 0, push, announce by webhook, and
    wait (until the next commit at most) for FleetSync to report the revision applied."""
    n = 0
    while True:
        started = time.monotonic()
        n += 1
        (work / "teams" / "team0" / "commits.yaml").write_text(template("commits", team=0, count=1, commit=n))
        sha = await anyio.to_thread.run_sync(functools.partial(push, work, f"commit {n}"))
        pushed = time.monotonic()
        tally.in_flight.append(f"commit {n}")
        try:
            status = await announce(http, url, sha)
            if status != 202:
                print(f"  webhook for commit {n} answered {status}", flush=True)
        except httpx.HTTPError as err:
            print(f"  webhook for commit {n} failed: {err}", flush=True)
        with anyio.move_on_after(max(1.0, every - 2.0 - (time.monotonic() - started))):
            while await applied_revision(client) != sha:  # noqa: ASYNC110 - another process's state, polled
                await anyio.sleep(0.25)
            tally.commits_applied += 1
            tally.commit_latencies.append(time.monotonic() - pushed)
        tally.commits_made += 1  # counted once its outcome is known: one in flight at the end is not
        tally.in_flight.remove(f"commit {n}")
        await anyio.sleep(max(0.0, every - (time.monotonic() - started)))


@dataclass(frozen=True)
class Patch:
    what: str
    args: tuple[str, ...]
    ref: kube.Ref
    repaired: Any
    """live object → True when git's value is back."""


def patches_for(node: str) -> list[Patch]:
    class_ref = kube.Ref(api_version="resource.k8s.io/v1", kind="DeviceClass", namespace="", name=CLASS)
    quota_ref = kube.Ref(api_version="v1", kind="ResourceQuota", namespace="soak-team0", name="fleet-devices")
    node_ref = kube.Ref(api_version="v1", kind="Node", namespace="", name=node)
    return [
        Patch(
            what=f"DeviceClass {CLASS} spec.selectors",
            args=("deviceclass", CLASS, "--type=merge", "-p", '{"spec":{"selectors":[{"cel":{"expression":"true"}}]}}'),
            ref=class_ref,
            repaired=lambda o: o["spec"]["selectors"][0]["cel"]["expression"] == SELECTOR,
        ),
        Patch(
            what="ResourceQuota soak-team0/fleet-devices spec.hard",
            args=("resourcequota", "fleet-devices", "-n", "soak-team0", "--type=merge", "-p", QUOTA_PATCH),
            ref=quota_ref,
            repaired=lambda o: quantity(str(o["spec"]["hard"].get(QUOTA_KEY))) == QUOTA,  # the server writes 1k
        ),
        Patch(
            what=f"Node {node} label {POOL_LABEL}",
            args=("node", node, "--type=merge", "-p", json.dumps({"metadata": {"labels": {POOL_LABEL: "drifted"}}})),
            ref=node_ref,
            repaired=lambda o: (o["metadata"].get("labels") or {}).get(POOL_LABEL) not in (None, "drifted"),
        ),
    ]


async def drifts(sb: Sandbox, client: kube.Client, *, node: str, every: float, offset: float, tally: Tally) -> None:
    """Every ``every`` seconds (``offset`` after the commits), ``kubectl patch`` the next declared field and
    wait (until the next patch at most) for git's value to be back."""
    await anyio.sleep(offset)
    kinds = patches_for(node)
    n = 0
    while True:
        started = time.monotonic()
        patch = kinds[n % len(kinds)]
        n += 1
        proc = await anyio.to_thread.run_sync(functools.partial(sb.kubectl, "patch", *patch.args, check=False))
        answered = time.monotonic()
        if proc.returncode != 0:
            print(f"  kubectl patch of {patch.what} failed: {proc.stderr.strip()}", flush=True)
        else:
            tally.in_flight.append(f"patch of {patch.what}")
            back = False
            with anyio.move_on_after(max(1.0, every - 2.0 - (answered - started))):
                while not back:
                    await anyio.sleep(0.1)
                    with contextlib.suppress(kube.KubeError, KeyError, IndexError, TypeError):
                        back = bool(patch.repaired(await client.get(patch.ref)))
            tally.patches_made += 1
            tally.in_flight.remove(f"patch of {patch.what}")
            if back:
                tally.patches_repaired += 1
                tally.repair_latencies.append(time.monotonic() - answered)
            else:
                tally.unrepaired.append(patch.what)
        await anyio.sleep(max(0.0, every - (time.monotonic() - started)))


async def sampler(
    http: httpx.AsyncClient,
    client: kube.Client,
    url: str,
    *,
    pid: int,
    node: str,
    every: float,
    began: float,
    tally: Tally,
) -> None:
    """Every ``every`` seconds: the controller's VmRSS and its /metrics, taken together (and one node's Lease)."""
    lease = kube.Ref(api_version="coordination.k8s.io/v1", kind="Lease", namespace="kube-node-lease", name=node)
    tally.lease_node = node
    while True:
        started = time.monotonic()
        try:
            rss = rss_mb(pid)
        except OSError:
            rss = 0.0
        if rss <= 0:
            return  # the controller is gone (or a zombie): the run reports it
        try:
            response = await http.get(url)
            caches, reconciles, _, _ = scrape(response.text)
        except (httpx.HTTPError, ValueError):
            tally.scrape_errors += 1
            caches, reconciles = {}, {}
        tally.samples.append(Sample(at=started - began, rss=rss, caches=caches, reconciles=reconciles))
        with contextlib.suppress(kube.KubeError):
            tally.lease_renewals.add(str((await client.get(lease)).get("spec", {}).get("renewTime")))
        await anyio.sleep(max(0.0, every - (time.monotonic() - started)))


# -- the run --------------------------------------------------------------------------------


def controller_argv(*, bare: Path, sb: Sandbox, port: int, state: Path, secret: Path, args: Any) -> list[str]:
    script = Path(sys.executable).parent / "fleet-controller"
    head = [str(script)] if script.exists() else [sys.executable, "-m", "fleet.controller"]
    return [
        *head,
        f"--repo=file://{bare}",
        "--ref=main",
        f"--cluster={CLUSTER}",
        f"--kubeconfig={sb.kubeconfig}",
        f"--listen=127.0.0.1:{port}",
        f"--webhook-secret-file={secret}",
        f"--state-dir={state}",
        "--identity=soak",
        f"--interval={args.interval}",
        f"--resync={args.resync}",
        f"--health-timeout={args.health_timeout}",
    ]


def log_findings(log: Path) -> tuple[int, int, list[str]]:
    """(ERROR lines, "reconcile failed" lines, the first few of both) in the controller's log."""
    errors = failed = 0
    shown: list[str] = []
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return 0, 0, []
    for line in lines:
        is_error = " ERROR " in line or line.startswith("Traceback")
        is_failed = "reconcile failed" in line
        errors += is_error
        failed += is_failed
        if (is_error or is_failed) and len(shown) < 10:
            shown.append(line[:300])
    return errors, failed, shown


async def run(sb: Sandbox, root: Path, args: Any) -> int:
    counts = pool_counts(args.nodes)
    bare, work, state = root / "remote.git", root / "work", root / "state"
    bare.mkdir()
    git(bare, "init", "-q", "--bare", "-b", "main")
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    git(work, "remote", "add", "origin", str(bare))
    files = fleet_files(counts=counts, teams=args.teams, templates=args.templates)
    files["teams/team0/commits.yaml"] = template("commits", team=0, count=1, commit=0)
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    first = push(work, "the fleet")
    secret = root / "webhook-secret"
    secret.write_bytes(SECRET)
    sb.kubectl("apply", "-f", str(CRD))
    sb.kubectl("wait", "--for=condition=Established", "crd/fleetsyncs.fleet.gpufleet.dev", "--timeout=60s")
    limit = memory_limit_mib()
    node_names = [f"{key}-{i + 1:02d}" for key, count in counts.items() for i in range(count)]
    port = processes.free_port()
    argv = controller_argv(bare=bare, sb=sb, port=port, state=state, secret=secret, args=args)
    ctl = clusters.attach(sb, name="fleet-controller", argv=argv, env=dict(os.environ))
    base = f"http://127.0.0.1:{port}"
    print(f"  fleet: {len(node_names)} GPU nodes in {sum(1 for c in counts.values() if c)} pools, "
          f"{args.teams} teams, {args.templates + args.teams + 1} claim templates; KWOK: {kwok_heartbeat()}, "
          f"status reports every {args.heartbeat:g} s; controller pid {ctl.pid}, "
          f"log {ctl.log}", flush=True)  # fmt: skip
    tally = Tally()
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    probe = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            t0 = time.monotonic()
            with anyio.move_on_after(args.initial_timeout) as waited:
                while await applied_revision(probe) != first:
                    if not processes.alive(ctl):
                        print(f"error: fleet-controller exited before applying the fleet; its log:\n"
                              f"{processes.log_tail(ctl.log, 40)}", file=sys.stderr)  # fmt: skip
                        return 1
                    await anyio.sleep(1)
            if waited.cancelled_caught:
                print(f"error: the first commit was not applied within {args.initial_timeout:g} s "
                      f"(FleetSync {CLUSTER} lastAppliedRevision); the controller's log:\n"
                      f"{processes.log_tail(ctl.log, 40)}", file=sys.stderr)  # fmt: skip
                return 1
            initial = time.monotonic() - t0
            print(f"  first commit applied in {initial:.1f} s; soaking for {args.minutes:g} min "
                  f"(warm-up {args.warmup:g} min)", flush=True)  # fmt: skip
            began = time.monotonic()
            with anyio.move_on_after(args.minutes * 60):
                async with anyio.create_task_group() as tg:
                    sample = functools.partial(sampler, http, probe, f"{base}/metrics", pid=ctl.pid,
                                               node=node_names[0], every=args.sample, began=began,
                                               tally=tally)  # fmt: skip
                    tg.start_soon(sample)
                    tg.start_soon(functools.partial(heartbeats, client, node_names, period=args.heartbeat, tally=tally))
                    tg.start_soon(lambda: pods(client, teams=args.teams, every=args.pod_every, alive=args.pods,
                                               tally=tally))  # fmt: skip
                    tg.start_soon(lambda: commits(probe, http, work=work, url=f"{base}/webhook",
                                                  every=args.commit_every, tally=tally))  # fmt: skip
                    tg.start_soon(lambda: drifts(sb, probe, node=node_names[0], every=args.patch_every,
                                                 offset=args.patch_every / 2, tally=tally))  # fmt: skip
            alive = processes.alive(ctl)
            final_caches: dict[str, float] = {}
            final_reconciles: dict[str, float] = {}
            reconcile_seconds = repaired_metric = 0.0
            if alive:
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    page = (await http.get(f"{base}/metrics")).text
                    final_caches, final_reconciles, reconcile_seconds, repaired_metric = scrape(page)
    finally:
        await client.close()
        await probe.close()
    log_errors, log_failed, shown = log_findings(ctl.log)
    if args.keep_log:
        shutil.copyfile(ctl.log, args.keep_log)
    processes.stop(ctl)
    report(args=args, tally=tally, limit=limit, alive=alive, initial=initial, final_reconciles=final_reconciles,
           reconcile_seconds=reconcile_seconds,
           final_caches=final_caches, repaired_metric=repaired_metric, log_errors=log_errors, log_failed=log_failed,
           shown=shown, nodes=len(node_names))  # fmt: skip
    return 0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def report(
    *,
    args: Any,
    tally: Tally,
    limit: float,
    alive: bool,
    initial: float,
    final_reconciles: dict[str, float],
    reconcile_seconds: float,
    final_caches: dict[str, float],
    repaired_metric: float,
    log_errors: int,
    log_failed: int,
    shown: list[str],
    nodes: int,
) -> None:
    after = [s for s in tally.samples if s.at >= args.warmup * 60]
    rss_points = [(s.at, s.rss) for s in after]
    start_rss = after[0].rss if after else float("nan")
    end_rss = after[-1].rss if after else float("nan")
    slope = slope_per_hour(rss_points)
    growth = (end_rss - start_rss) / start_rss * 100 if after else float("nan")
    in_30_days = end_rss + slope * 24 * 30
    limit_day = "never" if slope <= 0 or not after else f"{max(0.0, (limit - end_rss) / slope / 24):.1f}"
    hours = f", {(limit - end_rss) / slope:.1f} hours" if limit_day != "never" else ""
    names = sorted({name for s in after for name in s.caches} | set(final_caches))
    reconciles = final_reconciles or (tally.samples[-1].reconciles if tally.samples else {})
    total = sum(reconciles.values())
    errors = sum(v for k, v in reconciles.items() if k != "success")
    window = f"{after[0].at / 60:.1f}-{after[-1].at / 60:.1f} min" if after else "no samples"

    print(f"\n  soak of {args.minutes:g} min on {nodes} GPU nodes; samples every {args.sample:g} s after a "
          f"{args.warmup:g} min warm-up ({len(after)} samples, {window}); controller "
          f"{'still running' if alive else 'GONE before the end'}")  # fmt: skip
    print(f"  {'RSS at warm-up end':<34} {start_rss:9.1f} MiB")
    print(f"  {'RSS at the end':<34} {end_rss:9.1f} MiB   (min {min((p[1] for p in rss_points), default=0):.1f}, "
          f"max {max((p[1] for p in rss_points), default=0):.1f})")  # fmt: skip
    print(f"  {'slope (least squares)':<34} {slope:9.2f} MiB/hour")
    print(f"  {'growth over the window':<34} {growth:9.2f} %   (target over 30 min: ≤ 2 %)")
    print(f"  {'extrapolated to 30 days':<34} {in_30_days:9.1f} MiB   (Deployment limit {limit:g} MiB, "
          f"reached on day {limit_day}{hours})")  # fmt: skip
    step = max(1, len(tally.samples) // 40)
    print("  RSS (min since the first apply: MiB): "
          + ", ".join(f"{s.at / 60:.1f}: {s.rss:.0f}" for s in tally.samples[::step]))  # fmt: skip
    if names:
        print(f"  {'cache':<20} {'first':>9} {'last':>9} {'max':>9}  flat")
        for name in names:
            points = [(s.at, s.caches[name]) for s in after if name in s.caches]
            if not points:
                print(f"  {name:<20} {'-':>9} {'-':>9} {'-':>9}  (only in the final scrape: {final_caches.get(name)})")
                continue
            print(f"  {name:<20} {points[0][1]:9.0f} {points[-1][1]:9.0f} {max(p[1] for p in points):9.0f}  "
                  f"{'yes' if flat(points) else 'NO'}")  # fmt: skip
    else:
        print("  caches: no fleet_cache_entries series on /metrics")
    mean = f"{reconcile_seconds / total:.2f} s" if total else "-"
    by_result = ", ".join(f"{k} {v:.0f}" for k, v in sorted(reconciles.items())) or "none"
    print(f"  reconciles {total:.0f}, {mean} each on average ({by_result}); "
          f"errors {errors:.0f}; log: {log_errors} ERROR lines, {log_failed} 'reconcile failed' lines; "
          f"/metrics scrape failures {tally.scrape_errors}")  # fmt: skip
    for line in shown:
        print(f"    {line}")
    print(
        f"  commits applied {tally.commits_applied} / made {tally.commits_made} (push → applied p50 "
        f"{pct(tally.commit_latencies, 0.5):.2f} s, max {max(tally.commit_latencies, default=float('nan')):.2f} s)"
    )
    print(f"  patches repaired {tally.patches_repaired} / made {tally.patches_made} (p50 "
          f"{pct(tally.repair_latencies, 0.5):.2f} s, max {max(tally.repair_latencies, default=float('nan')):.2f} s; "
          f"fleet_drift_repaired_total {repaired_metric:g})"
          + (f"; not repaired: {', '.join(tally.unrepaired)}" if tally.unrepaired else ""))  # fmt: skip
    if tally.in_flight:
        print(f"  cut short by the end (in neither count): {', '.join(tally.in_flight)}")
    print(
        f"  churn: {tally.pods_created} pods created, {tally.pods_deleted} deleted ({tally.pod_errors} errors); "
        f"{tally.heartbeats} node status reports ({tally.heartbeat_errors} errors); node {tally.lease_node}'s "
        f"Lease showed {len(tally.lease_renewals)} renewTimes in {len(tally.samples)} samples {args.sample:g} s apart; "
        f"initial apply {initial:.1f} s"
    )
    cache_figures: dict[str, object] = {}
    for name in names:
        points = [(s.at, s.caches[name]) for s in after if name in s.caches]
        if points:
            cache_figures[f"cache_{name}"] = f"{points[0][1]:.0f}/{points[-1][1]:.0f}/{max(p[1] for p in points):.0f}"
            cache_figures[f"cache_{name}_flat"] = "yes" if flat(points) else "no"
    result(
        minutes=f"{args.minutes:g}",
        nodes=nodes,
        warmup_min=f"{args.warmup:g}",
        samples=len(after),
        rss_warm_mib=f"{start_rss:.1f}",
        rss_end_mib=f"{end_rss:.1f}",
        slope_mib_per_h=f"{slope:.2f}",
        growth_pct=f"{growth:.2f}",
        rss_30d_mib=f"{in_30_days:.0f}",
        limit_mib=f"{limit:g}",
        limit_day=limit_day,
        **(cache_figures or {"caches": "none"}),
        reconciles=f"{total:.0f}",
        errors=f"{errors:.0f}",
        log_errors=log_errors,
        commits_applied=tally.commits_applied,
        commits_made=tally.commits_made,
        patches_repaired=tally.patches_repaired,
        patches_made=tally.patches_made,
        controller_alive="yes" if alive else "no",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the soak after the first apply")
    parser.add_argument(
        "--warmup", type=float, default=None, help="minutes left out of the figures (default 10 %% of the run, ≥ 1)"
    )
    parser.add_argument("--nodes", type=int, default=1000, help="KWOK GPU nodes (half H100, a quarter A100, H200)")
    parser.add_argument("--teams", type=int, default=4)
    parser.add_argument("--templates", type=int, default=100, help="claim templates besides each team's one-gpu")
    parser.add_argument("--heartbeat", type=float, default=300.0, help="seconds between two status reports of a node")
    parser.add_argument("--pod-every", type=float, default=3.0, help="seconds between two pods created")
    parser.add_argument("--pods", type=int, default=10, help="pods alive at most (the oldest is deleted)")
    parser.add_argument("--commit-every", type=float, default=60.0)
    parser.add_argument("--patch-every", type=float, default=60.0)
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between RSS and /metrics samples")
    parser.add_argument("--interval", default="1m", help="the controller's --interval (polling)")
    parser.add_argument("--resync", default="10m", help="the controller's --resync")
    parser.add_argument("--health-timeout", default="10m", help="the controller's --health-timeout")
    parser.add_argument("--initial-timeout", type=float, default=1800.0, help="seconds the first apply may take")
    parser.add_argument("--keep-log", type=Path, default=None, help="copy the controller's log here")
    args = parser.parse_args()
    if args.warmup is None:
        args.warmup = max(1.0, args.minutes / 10)
    if not 0 <= args.warmup < args.minutes or args.nodes < 1 or args.teams < 1:
        parser.error("need --minutes > --warmup ≥ 0, --nodes ≥ 1 and --teams ≥ 1")
    if not math.isfinite(args.minutes):
        parser.error("--minutes must be a number")
    counts = pool_counts(args.nodes)
    with sandbox({k: v for k, v in counts.items() if v}) as sb, tempfile.TemporaryDirectory(prefix="fleet-soak-") as t:
        rc = anyio.run(run, sb, Path(t), args)
    sys.exit(rc)


if __name__ == "__main__":
    main()
