"""The sandbox cluster: a real control plane on 127.0.0.1 with simulated NVIDIA GPU nodes.

``up`` starts etcd, kube-apiserver (RBAC on, static tokens, self-signed serving
certificate), kube-controller-manager (with the resourceclaim controller),
kube-scheduler and KWOK, each in its own process group on free loopback ports, at
one of the selectable Kubernetes releases (``fleet.sandbox.releases``: the default, or
``FLEET_KUBERNETES``), with that release's DRA feature gates on all three Kubernetes
components and the DRA APIs it serves only when asked (``--runtime-config``). It then
installs the NVIDIA driver's DeviceClasses, creates a KWOK Node per simulated GPU
node and publishes each node's ResourceSlice as the driver would
(``fleet.sandbox.gpus``). The real scheduler allocates claims from those slices
and the real resourceclaim controller turns templates into claims, so what
passes here passes on a real cluster.

State lives in one directory (``$FLEET_SANDBOX_DIR``, default
``~/.local/state/fleet/sandbox``): ``state.json`` (release, pids, ports), ``kubeconfig``,
``pki/``, ``etcd/`` and ``logs/``. ``up`` on a healthy sandbox is a no-op,
``up`` over a dead one cleans it first, ``down`` stops every process group it
started and removes the directory.

``stop_component`` and ``start_component`` stop and start etcd or kube-apiserver of
a running sandbox on the same ports, data directory and certificates, so fault
tests can take the control plane away under a client and give it back: the
restarted apiserver serves the same certificate, and the restarted etcd the same data.

With ``forge=True`` the sandbox also runs a git forge, Gitea (``fleet.sandbox.forges``), in
``forge/`` on a free loopback port; it is a component like the others (``down`` stops it,
and ``stop_component``/``start_component`` take it away and give it back).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from fleet.sandbox import binaries, credentials, forges, gpus, identities, processes, profiles, releases, versions
from fleet.sandbox.errors import SandboxError, StartError

FIELD_MANAGER = "fleet-sandbox"
Progress = Callable[[str], None]


def _stderr(message: str) -> None:
    import sys

    print(message, file=sys.stderr, flush=True)


def default_dir() -> Path:
    env = os.environ.get("FLEET_SANDBOX_DIR")
    if env:
        return Path(env)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "fleet" / "sandbox"


@dataclass
class Sandbox:
    """What ``up`` started; saved as ``state.json`` so another process can inspect or stop it."""

    directory: Path
    ports: dict[str, int]
    components: list[processes.Running] = field(default_factory=list)
    bin_dir: dict[str, str] = field(default_factory=dict)
    pools: dict[str, int] = field(default_factory=dict)
    pool_options: dict[str, dict[str, str]] = field(default_factory=dict)
    """Driver options per pool (``migStrategy``, ``consumableShares``) of the profile it runs."""
    cpu_pools: dict[str, int] = field(default_factory=dict)
    """CPU (system) pools: untainted nodes without GPUs."""
    timings: dict[str, float] = field(default_factory=dict)
    attached: list[processes.Running] = field(default_factory=list)
    """Processes started against the sandbox (the demo's controller): stopped by ``down``, not part of its health."""
    apiserver_flags: list[str] = field(default_factory=list)
    """Extra kube-apiserver flags given to ``up`` (kept for ``start_component``)."""
    forge_port: int = 0
    """Gitea's HTTP port when the sandbox runs a forge, else 0."""
    kubernetes: str = versions.KUBERNETES
    """The Kubernetes release it runs (``v1.37.2``)."""

    @property
    def release(self) -> releases.Release:
        return releases.Release(self.kubernetes)

    @property
    def forge(self) -> forges.Forge | None:
        """The sandbox's Gitea, when it runs one."""
        if not self.forge_port:
            return None
        return forges.Forge(directory=self.directory / "forge", port=self.forge_port)

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def ca_file(self) -> Path:
        return self.directory / "pki" / "apiserver.crt"

    @property
    def audit_log(self) -> Path:
        """The API server's audit log: one JSON event per write (who, user agent, what, when)."""
        return self.directory / "logs" / "audit.log"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    def binary(self, name: str) -> Path:
        return Path(self.bin_dir[name])

    def kubectl(
        self, *args: str, context: str | None = None, stdin: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.binary("kubectl")), "--kubeconfig", str(self.kubeconfig)]
        if context:
            argv += ["--context", context]
        proc = subprocess.run([*argv, *args], input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise SandboxError(
                f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}",
                where=self.server,
                hint=f"inspect the logs in {self.directory / 'logs'}",
            )
        return proc

    def save(self) -> None:
        data = asdict(self)
        data["directory"] = str(self.directory)
        data["components"] = [dict(asdict(c), log=str(c.log)) for c in self.components]
        data["attached"] = [dict(asdict(c), log=str(c.log)) for c in self.attached]
        tmp = self.directory / "state.json.tmp"
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.directory / "state.json")

    @classmethod
    def load(cls, directory: Path) -> Sandbox | None:
        try:
            data = json.loads((directory / "state.json").read_text())
        except (OSError, ValueError):
            return None
        comps = [
            processes.Running(name=c["name"], pid=c["pid"], binary=c["binary"], log=Path(c["log"]))
            for c in data.get("components", [])
        ]
        attached = [
            processes.Running(name=c["name"], pid=c["pid"], binary=c["binary"], log=Path(c["log"]))
            for c in data.get("attached", [])
        ]
        return cls(
            directory=directory,
            ports=data["ports"],
            components=comps,
            bin_dir=data.get("bin_dir", {}),
            pools=data.get("pools", {}),
            pool_options=data.get("pool_options", {}),
            cpu_pools=data.get("cpu_pools", {}),
            timings=data.get("timings", {}),
            attached=attached,
            apiserver_flags=list(data.get("apiserver_flags", [])),
            forge_port=int(data.get("forge_port", 0)),
            kubernetes=str(data.get("kubernetes") or versions.KUBERNETES),
        )

    def healthy(self) -> bool:
        return (
            bool(self.components)
            and all(processes.alive(c) for c in self.components)
            and processes.probe(f"{self.server}/readyz", ca_file=self.ca_file)
        )


def _timed(sandbox: Sandbox, step: str, progress: Progress, started: float) -> None:
    sandbox.timings[step] = round(time.monotonic() - started, 2)
    progress(f"    {step}: {sandbox.timings[step]:.1f} s")


def _start_etcd(sb: Sandbox) -> processes.Running:
    client, peer = f"http://127.0.0.1:{sb.ports['etcd']}", f"http://127.0.0.1:{sb.ports['etcd-peer']}"
    return processes.start(
        "etcd",
        [
            str(sb.binary("etcd")),
            "--name=fleet-sandbox",
            f"--data-dir={sb.directory / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=fleet-sandbox={peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
            "--quota-backend-bytes=8589934592",
        ],
        logs=sb.directory / "logs",
    )


AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  namespaces: [kube-node-lease]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
"""
"""Writes only, at Metadata level (user, user agent, object, time; no bodies): enough to say which
process wrote what and when (tests/faults/test_leader_loss.py), small enough to leave on."""


def _start_apiserver(sb: Sandbox) -> processes.Running:
    d = sb.directory
    (d / "audit-policy.yaml").write_text(AUDIT_POLICY)
    (d / "logs").mkdir(exist_ok=True)
    return processes.start(
        "kube-apiserver",
        [
            str(sb.binary("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{sb.ports['etcd']}",
            "--bind-address=127.0.0.1",
            f"--secure-port={sb.ports['apiserver']}",
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",
            f"--cert-dir={d / 'pki'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            f"--token-auth-file={d / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount",
            "--profiling=false",
            # PodTemplates (which nothing in fleet uses) are watched straight from etcd, so a test
            # can compact etcd and get a real 410 Gone, which a young watch cache never gives.
            "--watch-cache-sizes=podtemplates#0",
            *sb.release.apiserver_flags(),
            f"--audit-policy-file={d / 'audit-policy.yaml'}",
            f"--audit-log-path={sb.audit_log}",
            "--audit-log-maxsize=200",
            "--audit-log-maxbackup=1",
            *sb.apiserver_flags,
        ],
        logs=d / "logs",
    )


def _start_workers(sb: Sandbox, b: binaries.Binaries) -> list[tuple[processes.Running, str]]:
    kc = str(sb.kubeconfig)
    common = [
        f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
        *sb.release.flags(),
    ]
    kcm = processes.start(
        "kube-controller-manager",
        [
            str(b["kube-controller-manager"]),
            *common,
            f"--secure-port={sb.ports['controller-manager']}",
            f"--service-account-private-key-file={sb.directory / 'sa.key'}",
            f"--root-ca-file={sb.ca_file}",
            "--node-monitor-period=1s",
            "--controllers=*",
        ],
        logs=sb.directory / "logs",
    )
    sched = processes.start(
        "kube-scheduler",
        [
            str(b["kube-scheduler"]),
            *common,
            f"--secure-port={sb.ports['scheduler']}",
        ],
        logs=sb.directory / "logs",
    )
    kwok = processes.start(
        "kwok",
        [
            str(b["kwok"]),
            f"--kubeconfig={kc}",
            f"--config={b.kwok_stages}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--node-ip=127.0.0.1",
            "--cidr=10.0.0.0/16",
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{sb.ports['kwok']}",
        ],
        logs=sb.directory / "logs",
    )
    return [
        (kcm, f"https://127.0.0.1:{sb.ports['controller-manager']}/healthz"),
        (sched, f"https://127.0.0.1:{sb.ports['scheduler']}/readyz"),
        (kwok, f"http://127.0.0.1:{sb.ports['kwok']}/healthz"),
    ]


def _dump(objs: list[dict[str, Any]]) -> str:
    yaml = YAML(typ="safe", pure=True)
    with tempfile.SpooledTemporaryFile(mode="w+") as fh:
        yaml.dump_all(objs, fh)
        fh.seek(0)
        return str(fh.read())


def apply(sb: Sandbox, objs: list[dict[str, Any]]) -> None:
    """Server-side apply objects with the sandbox's own field manager (via the real kubectl)."""
    sb.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        f"--field-manager={FIELD_MANAGER}",
        "-f",
        "-",
        stdin=_dump(objs),
        timeout=300,
    )


def publish_gpus(sb: Sandbox, profile: profiles.Profile) -> int:
    """Create the GPU nodes of a profile and publish their ResourceSlices; returns the number of devices."""
    nodes = profile.nodes()
    apply(sb, [*gpus.device_classes(), *(gpus.node_manifest(n) for n in nodes)])
    listed = json.loads(sb.kubectl("get", "nodes", "-o", "json").stdout)
    uids = {item["metadata"]["name"]: item["metadata"]["uid"] for item in listed["items"]}
    slices = [s for n in nodes for s in gpus.slice_manifests(n, node_uid=uids[n.name])]
    for i in range(0, len(slices), 200):
        apply(sb, slices[i : i + 200])
    return sum(len(s["spec"].get("devices") or ()) for s in slices)


TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")


def parse_taint(text: str) -> tuple[dict[str, str] | None, str]:
    """``KEY[=VALUE]:EFFECT`` as a device taint, or ``KEY-`` (None, key) to remove one."""
    if text.endswith("-") and ":" not in text:
        return None, text[:-1]
    head, sep, effect = text.rpartition(":")
    key, _, value = head.partition("=")
    if not sep or not key or effect not in TAINT_EFFECTS:
        raise SandboxError(
            f"device taint {text!r} is not KEY[=VALUE]:EFFECT",
            where="fleetctl sandbox taint-device",
            hint=f"EFFECT is one of {', '.join(TAINT_EFFECTS)}, e.g. gpu.nvidia.com/xid=79:NoSchedule "
            "(the driver's XID taint); KEY- removes a taint",
        )
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint, key


def taint_device(sb: Sandbox, *, node: str, device: str, taint: str) -> dict[str, Any]:
    """Republish the node's slice with ``taint`` on ``device``, as the driver's health monitor does.

    The driver keeps one taint per key (a newer XID replaces the older one's value) and
    republishes the whole slice; a single changed slice keeps the pool's generation, as its
    ResourceSlice controller does. Returns the device as published afterwards.
    """
    wanted, key = parse_taint(taint)
    listed = json.loads(
        sb.kubectl("get", "resourceslices", "--field-selector", f"spec.nodeName={node}", "-o", "json").stdout
    )["items"]
    for item in listed:
        for published in (item.get("spec") or {}).get("devices") or ():
            if published.get("name") != device:
                continue
            taints = [t for t in published.get("taints") or () if t.get("key") != key]
            if wanted is not None:
                taints.append(wanted)
            if taints:
                published["taints"] = [{k: v for k, v in t.items() if k != "timeAdded"} for t in taints]
            else:
                published.pop("taints", None)
            meta = item["metadata"]
            apply(
                sb,
                [
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceSlice",
                        "metadata": {k: meta[k] for k in ("name", "ownerReferences") if k in meta},
                        "spec": item["spec"],
                    }
                ],
            )
            return dict(published)
    names = sorted(d.get("name", "") for i in listed for d in (i.get("spec") or {}).get("devices") or ())
    raise SandboxError(
        f"node {node} publishes no device {device}",
        where=sb.server,
        hint=f"devices of {node}: {', '.join(names[:20]) or 'none (is the node name right?)'}",
    )


def publish_cpu_nodes(sb: Sandbox, profile: profiles.Profile) -> list[str]:
    """Create the profile's CPU nodes (untainted, no GPUs); returns their names."""
    nodes = profile.cpu_nodes()
    if nodes:
        apply(sb, [gpus.cpu_node_manifest(name=name, pool=pool) for name, pool in nodes])
    return [name for name, _ in nodes]


def wait_nodes_ready(sb: Sandbox, names: set[str], *, timeout: float = 120) -> None:
    """Wait until KWOK reports every node Ready and node-lifecycle has removed the not-ready taint.

    `timeout` bounds a stall, not the whole wait: a thousand nodes come up at the pace of KWOK's
    heartbeats and node-lifecycle's monitor, so the wait goes on while nodes keep turning Ready.
    """
    deadline = time.monotonic() + timeout
    pending = set(names)
    while True:
        listed = json.loads(sb.kubectl("get", "nodes", "-o", "json").stdout)
        before = len(pending)
        pending = set(names)
        for item in listed["items"]:
            ready = any(
                c["type"] == "Ready" and c["status"] == "True" for c in item.get("status", {}).get("conditions", [])
            )
            tainted = any(t["key"].startswith("node.kubernetes.io/") for t in item["spec"].get("taints", []))
            if ready and not tainted:
                pending.discard(item["metadata"]["name"])
        if not pending:
            return
        if len(pending) < before:
            deadline = time.monotonic() + timeout
        elif time.monotonic() > deadline:
            shown = ", ".join(sorted(pending)[:10]) + (f" and {len(pending) - 10} more" if len(pending) > 10 else "")
            raise StartError(
                f"{len(pending)} of {len(names)} nodes not Ready, none turned Ready in {timeout:.0f} s: {shown}",
                where=sb.server,
                hint=f"see {sb.directory / 'logs' / 'kwok.log'}",
            )
        time.sleep(0.5 if len(names) < 100 else 2)


def _allocate_ports(apiserver_port: int | None) -> dict[str, int]:
    if apiserver_port is not None and processes.port_in_use(apiserver_port):
        raise SandboxError(
            f"port {apiserver_port} on 127.0.0.1 is already in use",
            where="--apiserver-port",
            hint="choose another port, or omit --apiserver-port to use a free one",
        )
    ports = {n: processes.free_port() for n in ("etcd", "etcd-peer", "controller-manager", "scheduler", "kwok")}
    ports["apiserver"] = apiserver_port or processes.free_port()
    return ports


def _port_clash(err: StartError) -> bool:
    return "address already in use" in (err.hint or "")


def up(
    *,
    directory: Path | None = None,
    profile: profiles.Profile | None = None,
    apiserver_port: int | None = None,
    progress: Progress = _stderr,
    attempts: int = 3,
    apiserver_flags: tuple[str, ...] = (),
    forge: bool = False,
    release: releases.Release | None = None,
) -> Sandbox:
    """Start the sandbox (or confirm the running one) and return it.

    ``release`` is the Kubernetes release to run (default ``releases.select()``: ``$FLEET_KUBERNETES``
    or the default); a running sandbox of another release is refused, not replaced.
    ``apiserver_flags`` are added to kube-apiserver's command line (a later flag wins,
    list flags append), e.g. ``--watch-cache-sizes=...`` for a fault test's own sandbox.
    ``forge`` also starts Gitea (``start_forge``), on a running sandbox too.
    """
    directory = directory or default_dir()
    profile = profile or profiles.load(None)
    release = release or releases.select()
    existing = Sandbox.load(directory)
    if existing is not None:
        if existing.healthy():
            if existing.kubernetes != release.version:
                raise SandboxError(
                    f"a sandbox running Kubernetes {existing.kubernetes} is already up, not {release.version}",
                    where=str(directory),
                    hint="run `fleetctl sandbox down` first to change the release",
                )
            if (existing.pools, existing.cpu_pools, existing.pool_options) != (
                profile.pools,
                profile.cpu_pools,
                profile.options,
            ):
                raise SandboxError(
                    f"a sandbox with pools {existing.pools} and CPU pools {existing.cpu_pools} is already running",
                    where=str(directory),
                    hint="run `fleetctl sandbox down` first to change the profile",
                )
            progress(f"sandbox already up at {existing.server} ({directory})")
            if forge and existing.forge is None:
                start_forge(existing, progress=progress)
            return existing
        progress("found a stopped or broken sandbox; cleaning it up")
        down(directory=directory, progress=progress)
    found = binaries.locate(release)
    bins = found if found is not None else binaries.build(release=release, progress=progress)[0]
    for attempt in range(attempts):
        try:
            ports = _allocate_ports(apiserver_port)
            sb = _up_once(
                directory, profile, bins, ports, progress, apiserver_flags=list(apiserver_flags), release=release
            )
            if forge:
                start_forge(sb, progress=progress)
            return sb
        except StartError as err:
            down(directory=directory, progress=lambda _m: None)
            if not _port_clash(err) or apiserver_port is not None or attempt == attempts - 1:
                raise
            progress("a port was taken while starting; retrying on other ports")
    raise AssertionError("unreachable")


def _up_once(
    directory: Path,
    profile: profiles.Profile,
    bins: binaries.Binaries,
    ports: dict[str, int],
    progress: Progress,
    *,
    apiserver_flags: list[str],
    release: releases.Release,
) -> Sandbox:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pki").mkdir(exist_ok=True)
    sb = Sandbox(
        directory=directory,
        ports=ports,
        bin_dir={k: str(v.resolve()) for k, v in bins.paths.items()},
        pools=dict(profile.pools),
        pool_options=dict(profile.options),
        cpu_pools=dict(profile.cpu_pools),
        apiserver_flags=apiserver_flags,
        kubernetes=release.version,
    )
    total = time.monotonic()
    credentials.write_service_account_key(directory)
    tokens = credentials.write_tokens(directory)
    progress(f"==> starting sandbox (Kubernetes {release.version}) in {directory}")
    t = time.monotonic()
    etcd = _start_etcd(sb)
    sb.components.append(etcd)
    sb.save()
    processes.wait_ready(etcd, f"http://127.0.0.1:{ports['etcd']}/health", timeout=60)
    _timed(sb, "etcd", progress, t)
    t = time.monotonic()
    api = _start_apiserver(sb)
    sb.components.append(api)
    sb.save()
    processes.wait_ready(api, f"{sb.server}/readyz", ca_file=sb.ca_file, timeout=180)
    credentials.write_kubeconfig(sb.kubeconfig, server=sb.server, ca_file=sb.ca_file, tokens=tokens)
    _timed(sb, "kube-apiserver", progress, t)
    t = time.monotonic()
    workers = _start_workers(sb, bins)
    sb.components += [w for w, _ in workers]
    sb.save()
    for worker, url in workers:
        processes.wait_ready(worker, url, insecure=True, timeout=120)
    _timed(sb, "controller-manager, scheduler, kwok", progress, t)
    t = time.monotonic()
    devices = publish_gpus(sb, profile)
    cpu_nodes = publish_cpu_nodes(sb, profile)
    wait_nodes_ready(sb, {n.name for n in profile.nodes()} | set(cpu_nodes))
    _timed(
        sb, f"{len(profile.nodes())} GPU nodes, {devices} devices, {len(cpu_nodes)} CPU nodes published", progress, t
    )
    sb.timings["total"] = round(time.monotonic() - total, 2)
    sb.save()
    progress(f"sandbox up in {sb.timings['total']:.1f} s: {sb.server}\n  export KUBECONFIG={sb.kubeconfig}")
    return sb


def start_forge(sb: Sandbox, *, progress: Progress = _stderr) -> forges.Forge:
    """Start Gitea as a component of ``sb`` (built first if the cache lacks it) and return it."""
    gitea, _ = binaries.build_gitea(progress=progress)
    t = time.monotonic()
    forge, running = forges.start(directory=sb.directory / "forge", gitea=gitea, logs=sb.directory / "logs")
    identities.provision(forge)
    sb.components.append(running)
    sb.forge_port = forge.port
    sb.bin_dir["gitea"] = str(gitea.binary)
    sb.save()
    _timed(sb, "gitea", progress, t)
    progress(f"  forge (Gitea {versions.GITEA}) at {forge.url}, admin {forges.ADMIN}")
    return forge


def down(*, directory: Path | None = None, progress: Progress = _stderr) -> bool:
    """Stop every process the sandbox started and remove its directory; False if there was none."""
    directory = directory or default_dir()
    sb = Sandbox.load(directory)
    if sb is None:
        if directory.exists() and (directory / "kubeconfig").exists():
            shutil.rmtree(directory, ignore_errors=True)
        progress(f"no sandbox at {directory}")
        return False
    for comp in [*reversed(sb.attached), *reversed(sb.components)]:
        processes.stop(comp)
    leftovers = [(c.name, p) for c in [*sb.attached, *sb.components] for p in processes.group_members(c.pid)]
    if leftovers:
        raise SandboxError(
            f"processes still running after stop: {leftovers}",
            where=str(directory),
            hint="kill them by hand (kill -9 PID) and run `fleetctl sandbox down` again",
        )
    shutil.rmtree(directory, ignore_errors=True)
    progress(f"sandbox at {directory} stopped and removed")
    return True


RESTARTABLE = ("etcd", "kube-apiserver", "gitea")


def _component(sb: Sandbox, name: str) -> processes.Running:
    if name not in RESTARTABLE:
        raise SandboxError(
            f"cannot stop or start {name!r} of a running sandbox",
            where=str(sb.directory),
            hint=f"choose one of {', '.join(RESTARTABLE)}",
        )
    for comp in sb.components:
        if comp.name == name:
            return comp
    raise SandboxError(
        f"the sandbox has no {name} component", where=str(sb.directory), hint="start it with `fleetctl sandbox up`"
    )


def stop_component(sb: Sandbox, name: str, *, grace: float = 10.0) -> None:
    """Stop ``name`` (etcd, kube-apiserver or gitea) of a running sandbox: SIGTERM, then SIGKILL after ``grace`` s."""
    processes.stop(_component(sb, name), grace=grace)


def start_component(sb: Sandbox, name: str, *, timeout: float = 180) -> float:
    """Start ``name`` again on its ports, data directory and certificates; seconds until it answered ready."""
    old = _component(sb, name)
    if processes.alive(old):
        raise SandboxError(
            f"{name} is still running (pid {old.pid})",
            where=str(sb.directory),
            hint="stop it first with stop_component",
        )
    if name == "gitea":
        assert sb.forge is not None  # _component found its process
        started = time.monotonic()
        gitea = binaries.locate_gitea()
        if gitea is None:
            raise SandboxError("Gitea is not built", where=str(sb.directory), hint="run `fleetctl sandbox build`")
        new = forges.serve(forge=sb.forge, gitea=gitea, logs=sb.directory / "logs")
        sb.components[sb.components.index(old)] = new
        sb.save()
        return time.monotonic() - started
    if name == "etcd":
        new, url, ca = _start_etcd(sb), f"http://127.0.0.1:{sb.ports['etcd']}/health", None
    else:
        new, url, ca = _start_apiserver(sb), f"{sb.server}/readyz", sb.ca_file
    sb.components[sb.components.index(old)] = new
    sb.save()
    return processes.wait_ready(new, url, ca_file=ca, timeout=timeout)


def attach(sb: Sandbox, *, name: str, argv: list[str], env: dict[str, str] | None = None) -> processes.Running:
    """Start ``argv`` as a process that belongs to the sandbox: ``down`` stops it (log in ``logs/<name>.log``)."""
    for old in [c for c in sb.attached if c.name == name]:
        processes.stop(old)
        sb.attached.remove(old)
    running = processes.start(name, argv, logs=sb.directory / "logs", env=env)
    sb.attached.append(running)
    sb.save()
    return running


def status(*, directory: Path | None = None) -> dict[str, Any]:
    """What runs, whether each component answers, and what the cluster holds."""
    directory = directory or default_dir()
    sb = Sandbox.load(directory)
    if sb is None:
        return {"directory": str(directory), "up": False}
    comps = [{"name": c.name, "pid": c.pid, "running": processes.alive(c), "log": str(c.log)} for c in sb.components]
    out: dict[str, Any] = {
        "directory": str(directory),
        "up": sb.healthy(),
        "kubernetes": sb.kubernetes,
        "feature_gates": list(sb.release.feature_gates),
        "runtime_config": list(sb.release.runtime_config),
        "server": sb.server,
        "kubeconfig": str(sb.kubeconfig),
        "components": comps,
        "pools": sb.pools,
        "cpu_pools": sb.cpu_pools,
        "timings": sb.timings,
        "forge": sb.forge.url if sb.forge is not None else "",
    }
    if out["up"]:
        nodes = json.loads(sb.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        slices = json.loads(sb.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
        out["nodes"] = len(nodes)
        out["devices"] = sum(len(s["spec"].get("devices", [])) for s in slices)
    return out


__all__ = [
    "FIELD_MANAGER",
    "RESTARTABLE",
    "Sandbox",
    "apply",
    "attach",
    "default_dir",
    "down",
    "publish_cpu_nodes",
    "publish_gpus",
    "start_component",
    "start_forge",
    "status",
    "stop_component",
    "up",
    "wait_nodes_ready",
]
