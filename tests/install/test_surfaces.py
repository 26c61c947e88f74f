"""Secrets and surfaces of the real ``python -m fleet.controller`` process against the sandbox.

1. **No credential on any surface.** The controller follows the example fleet over HTTPS
   (the real ``git http-backend`` behind TLS and HTTP Basic auth with a token), installs
   the GPU Operator stage through the real helm binary, receives signed GitHub and GitLab
   webhooks (GitLab's carries the secret itself), posts commit statuses with a token to a
   loopback server shaped as GitHub's statuses API (a test double for a SaaS API that cannot
   be reached here), repairs a drift, and leaves alone a
   Secret a person created in a namespace it manages; then it is restarted following the
   same repository over SSH (the real OpenSSH server, a private key) and applies one more
   commit. While it runs, a thread reads ``/proc/PID/cmdline`` and ``environ`` of the
   controller and of every process below it (git, ssh, askpass, helm) every 20 ms.
   Afterwards every surface is searched for every credential's bytes (the API server's
   bearer token too), and for their base64: the log (DEBUG, with the OpenTelemetry
   console exporter writing every span into it), Events, the FleetSync status,
   ``/metrics``, ``fleetctl diff``, the state directory, and the process samples.
2. **Webhook flood.** 1,000 requests per second of garbage from a separate process
   (``tests.install.flood``) for 30 s while the controller reconciles: a commit announced
   by a signed webhook during the flood is applied, a drift made during the flood is
   repaired, and ``/healthz`` answers every probe within the liveness probe's timeout;
   reconciles and the loop lag (``fleet_loop_lag_seconds``, measured every 0.5 s) are reported.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from fleet.sandbox import Sandbox, binaries, charts, credentials
from fleet.sandbox.operators import StandInOperator
from fleet.sandbox.processes import free_port
from fleetctl.commands.demo import sandbox_overlay
from tests import processes, waits
from tests.hosts.apis import StatusAPI
from tests.operator.conftest import UPSTREAM
from tests.source.gitservers import SmartHttp, Sshd, Upstream, git, tls_context
from tests.waits import established

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "gpu-east"
T = TypeVar("T")
PROBE = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: {name}
  namespace: ml-research
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.nvidia.com
"""


@dataclass
class Running:
    """One ``python -m fleet.controller`` process; ``log`` holds its stdout and stderr."""

    proc: subprocess.Popen[bytes]
    log: Path
    port: int

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url(path), timeout=10) as response:
            data: bytes = response.read()
            return data

    def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
        request = urllib.request.Request(self.url("/webhook"), data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")

    def metrics(self) -> dict[str, float]:
        """Every sample of /metrics, keyed ``name{label=value,...}``."""
        found: dict[str, float] = {}
        for family in text_string_to_metric_families(self.get("/metrics").decode()):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                found[f"{sample.name}{{{labels}}}"] = sample.value
        return found

    def tail(self) -> str:
        return self.log.read_text()[-4000:]

    def alive(self) -> None:
        assert self.proc.poll() is None, "the controller exited:\n" + self.tail()

    def wait_for(self, check: Callable[[], T], *, within: float, what: str) -> T:
        """``waits.wait_for`` while the controller runs: fails at once if it exits, and with the log's tail."""

        def running() -> T:
            self.alive()
            return check()

        return waits.wait_for(running, within=within, what=what, every=0.5, details=self.tail)


@contextlib.contextmanager
def controller(sandbox: Sandbox, tmp_path: Path, name: str, **settings: str) -> Iterator[Running]:
    """``python -m fleet.controller`` as the sandbox admin with ``FLEET_*`` ``settings``; SIGTERM at the end."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "KUBECONFIG", "KUBERNETES_", "OTEL_"))}
    env.update(
        FLEET_KUBECONFIG=str(sandbox.kubeconfig),
        FLEET_CONTEXT=credentials.CLUSTER,
        FLEET_CLUSTER=CLUSTER,
        FLEET_LISTEN=f"127.0.0.1:{port}",
        FLEET_STATE_DIR=str(tmp_path / "state"),
        FLEET_IDENTITY=f"surfaces-{name}",
        HOME=str(tmp_path),
    )
    env.update({k if k.startswith("OTEL_") else f"FLEET_{k.upper()}": v for k, v in settings.items()})
    log = tmp_path / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fleet.controller"], stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
            start_new_session=True,
        )  # fmt: skip
    try:
        yield Running(proc=proc, log=log, port=port)
    finally:
        processes.stop(proc)


def fleetsync(sandbox: Sandbox) -> dict[str, object]:
    got = sandbox.kubectl("get", "fleetsync", CLUSTER, "-o", "json", check=False)
    return json.loads(got.stdout) if got.returncode == 0 else {}


def applied(sandbox: Sandbox, revision: str) -> bool:
    status = fleetsync(sandbox).get("status") or {}
    ready = [c for c in status.get("conditions") or () if c["type"] == "Ready"]  # type: ignore[attr-defined]
    return bool(ready) and ready[0]["status"] == "True" and status.get("lastAppliedRevision") == revision  # type: ignore[attr-defined]


def example_into(upstream: Upstream, *, chart_repository: str | None) -> str:
    shutil.copytree(ROOT / "examples" / "fleet", upstream.work, dirs_exist_ok=True)
    files: dict[str, str | bytes | None] = {}
    if chart_repository is not None:
        overlay = sandbox_overlay(cluster=CLUSTER, chart_repository=chart_repository)
        files["overlays/zz-sandbox/overlay.yaml"] = overlay
    return upstream.commit(files, message="the example fleet")


def github(body: bytes, *, secret: bytes, delivery: str) -> dict[str, str]:
    return {
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }


def push_body(revision: str) -> bytes:
    return json.dumps({"ref": "refs/heads/main", "after": revision, "at": time.time()}).encode()


# --- credential scanning --------------------------------------------------------------------


@dataclass
class Needles:
    """Each credential's bytes, as they are and base64-encoded (as Secret data and Basic auth carry them)."""

    raw: dict[str, bytes]

    def variants(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for name, value in self.raw.items():
            out[name] = value
            out[f"{name} (base64)"] = base64.b64encode(value)
        return out

    def find(self, data: bytes) -> list[str]:
        return [name for name, needle in self.variants().items() if needle in data]


@dataclass
class ProcessWatch:
    """Samples argv and environment of ``pid`` and every process below it until stopped."""

    pid: int
    needles: Needles
    every: float = 0.02
    seen: dict[int, str] = field(default_factory=dict)
    """Every process sampled: pid → argv."""
    leaks: list[str] = field(default_factory=list)
    rounds: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> ProcessWatch:
        self._thread = threading.Thread(target=self._loop, name="process-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def sample(self) -> None:
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        family = {self.pid}
        grew = True
        while grew:
            grew = False
            for pid, parent in parents.items():
                if parent in family and pid not in family:
                    family.add(pid)
                    grew = True
        for pid in family:
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes()
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                self.seen.setdefault(pid, argv.replace(b"\0", b" ").decode(errors="replace").strip())
                for part, data in (("cmdline", argv), ("environ", environ)):
                    for name in self.needles.find(data):
                        self.leaks.append(f"{name} in /proc/{pid}/{part}: {self.seen[pid][:200]}")
        self.rounds += 1

    def programs(self) -> set[str]:
        return {Path(argv.split()[0]).name for argv in self.seen.values() if argv}


def admin_token(sandbox: Sandbox) -> str:
    """The bearer token the controller authenticates to the API server with (the sandbox admin's)."""
    config = yaml.safe_load(sandbox.kubeconfig.read_text())
    [token] = [u["user"]["token"] for u in config["users"] if u["name"] == "admin"]
    return str(token)


def files_under(directory: Path) -> Iterator[tuple[Path, bytes]]:
    for root, _dirs, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            if path.is_file() and not path.is_symlink():
                yield path, path.read_bytes()


def test_no_credential_reaches_any_surface(gpu_east: Sandbox, tmp_path: Path) -> None:
    salt = os.urandom(6).hex()
    token = f"surface-token-{salt}"
    webhook = f"surface-webhook-{salt}".encode()
    status_token = f"surface-status-token-{salt}"
    secret_data = f"surface-secret-data-{salt}"
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "token").write_text(token + "\n")
    (secrets / "webhook").write_bytes(webhook + b"\n")
    (secrets / "status-token").write_text(status_token + "\n")

    rendered = gpu_east.kubectl("kustomize", str(ROOT / "overlays" / "single-replica")).stdout
    gpu_east.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=rendered)
    established(gpu_east.kubectl, "fleetsyncs.fleet.gpufleet.dev")
    get_probe = ("get", "secret", "-n", "ml-research", "surface-probe", "-o", "json")
    found = binaries.locate()
    assert found is not None, "the sandbox binaries are not built: run fleetctl sandbox build"
    upstream = Upstream(tmp_path / "upstream")
    sshd = Sshd(root=tmp_path / "sshd")
    key_lines = [line for line in sshd.client_key.read_text().splitlines() if not line.startswith("-----")]
    needles = Needles(
        {
            "git token": token.encode(),
            "HTTP Basic credentials": f"git:{token}".encode(),
            "webhook secret": webhook,
            "commit status token": status_token.encode(),
            "Secret data": secret_data.encode(),
            "SSH private key": "".join(key_lines).encode(),
            "Kubernetes bearer token": admin_token(gpu_east).encode(),
            **{f"SSH private key line {i}": line.encode() for i, line in enumerate(key_lines) if i and len(line) >= 40},
        }
    )
    logs: list[Path] = []
    scraped: dict[str, bytes] = {}
    tls, ca_file = tls_context(tmp_path / "tls")
    server = SmartHttp(root=upstream.root, token=token, tls=tls)
    status_api = StatusAPI()
    with (
        charts.serve(tmp_path / "charts", helm=found["helm"], upstream=UPSTREAM) as chart_repository,
        StandInOperator(gpu_east, upstream=UPSTREAM),
        server.running() as https_port,
        status_api.serving() as status_base,
    ):
        first = example_into(upstream, chart_repository=chart_repository)
        started = time.monotonic()
        with (
            controller(
                gpu_east,
                tmp_path,
                "https",
                repo=f"https://127.0.0.1:{https_port}/repo.git",
                ref="main",
                interval="2s",
                git_token_file=str(secrets / "token"),
                git_ca_file=str(ca_file),
                webhook_secret_file=str(secrets / "webhook"),
                commit_status_token_file=str(secrets / "status-token"),
                commit_status_provider="github",
                commit_status_api_url=f"{status_base}/api/v3",
                commit_status_repository="org/fleet",
                helm=str(found["helm"]),
                log_level="debug",
                OTEL_TRACES_EXPORTER="console",
            ) as running,
            ProcessWatch(running.proc.pid, needles) as watch,
        ):
            logs.append(running.log)
            running.wait_for(lambda: applied(gpu_east, first), within=300, what=f"Ready at {first}")
            print(f"\nhttps: Ready at the example {time.monotonic() - started:.0f}s after the start")

            # A Secret a person keeps in a namespace fleet created and manages.
            gpu_east.kubectl(
                "create", "secret", "generic", "surface-probe", "-n", "ml-research",
                f"--from-literal=password={secret_data}",
            )  # fmt: skip
            probe_before = json.loads(gpu_east.kubectl(*get_probe).stdout)

            # Webhooks: GitHub signs with the secret; GitLab sends the secret itself in a header.
            second = upstream.commit({"teams/ml-research/surface-a.yaml": PROBE.format(name="surface-a")})
            body = push_body(second)
            assert running.post(body, github(body, secret=webhook, delivery=f"gh-{salt}"))[0] == 202
            gitlab = {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": webhook.decode(), "X-Gitlab-Event-UUID": salt}
            assert running.post(push_body(second), gitlab)[0] == 202
            forged = {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": webhook.decode()[:-1] + "x"}
            status, answer = running.post(push_body(second), forged)
            assert status == 401 and webhook.decode() not in json.dumps(answer)
            running.wait_for(lambda: applied(gpu_east, second), within=120, what=f"Ready at {second}")

            # A drift: the controller recreates what a person deleted, and says so in an Event.
            gpu_east.kubectl("delete", "resourceclaimtemplate", "-n", "inference", "single-gpu")
            running.wait_for(
                lambda: (
                    gpu_east.kubectl(
                        "get", "resourceclaimtemplate", "-n", "inference", "single-gpu", check=False
                    ).returncode
                    == 0
                ),
                within=60,
                what="the deleted claim template recreated",
            )
            scraped["https /metrics"] = running.get("/metrics")
            https_metrics = running.metrics()
        https_watch = watch
    assert https_metrics.get("fleet_webhook_requests_total{result=accepted}", 0) >= 1
    assert https_metrics.get("fleet_webhook_requests_total{result=unauthorized}", 0) >= 1
    assert server.scanned >= 1 and server.leaks == [], server.leaks
    # The commit status token went where it belongs, in its header (so the scan below can fail).
    posted = [r for r in status_api.received if r.json()["state"] == "success"]
    assert posted and all(r.headers["authorization"] == f"Bearer {status_token}" for r in status_api.received)
    assert https_metrics.get("fleet_commit_status_posts_total{result=posted}", 0) >= 1

    # The same repository over SSH, with a private key.
    known_hosts = tmp_path / "known_hosts"
    with sshd.running(), StandInOperator(gpu_east, upstream=UPSTREAM):
        known_hosts.write_text(sshd.known_hosts())
        third = upstream.commit({"teams/ml-research/surface-b.yaml": PROBE.format(name="surface-b")})
        with (
            controller(
                gpu_east,
                tmp_path,
                "ssh",
                repo=f"ssh://root@127.0.0.1:{sshd.port}{upstream.bare}",
                ref="main",
                interval="2s",
                git_ssh_key_file=str(sshd.client_key),
                git_known_hosts_file=str(known_hosts),
                webhook_secret_file=str(secrets / "webhook"),
                log_level="debug",
                OTEL_TRACES_EXPORTER="console",
            ) as running,
            ProcessWatch(running.proc.pid, needles) as ssh_watch,
        ):
            logs.append(running.log)
            running.wait_for(lambda: applied(gpu_east, third), within=240, what=f"Ready at {third}")
            # A fetch's ssh lives for a few tens of milliseconds: a fast controller can be Ready before
            # a 20 ms sample caught one, so keep sampling through its next polls (every 2 s).
            running.wait_for(lambda: "ssh" in ssh_watch.programs(), within=30, what="an ssh process sampled")
            scraped["ssh /metrics"] = running.get("/metrics")

    # Every surface, every credential.
    surfaces: dict[str, bytes] = {f"log {log.name}": log.read_bytes() for log in logs}
    surfaces |= scraped
    surfaces["Events"] = gpu_east.kubectl("get", "events", "-A", "-o", "json").stdout.encode()
    surfaces["FleetSync"] = gpu_east.kubectl("get", "fleetsyncs", "-A", "-o", "json").stdout.encode()
    checkout = tmp_path / "checkout"
    git("clone", "--quiet", str(upstream.bare), str(checkout), cwd=tmp_path)
    diff = subprocess.run(
        [sys.executable, "-m", "fleetctl", "diff", str(checkout), "--cluster", CLUSTER,
         "--context", credentials.CLUSTER],
        capture_output=True, cwd=ROOT, env={**os.environ, "KUBECONFIG": str(gpu_east.kubeconfig), "NO_COLOR": "1"},
        timeout=300, check=False,
    )  # fmt: skip
    assert diff.returncode in (0, 1), diff.stderr.decode()[-2000:]
    surfaces["fleetctl diff"] = diff.stdout + diff.stderr
    for path, data in files_under(tmp_path / "state"):
        surfaces[f"state file {path.relative_to(tmp_path)}"] = data

    leaks = [f"{name} in {where}" for where, data in surfaces.items() for name in needles.find(data)]
    leaks += https_watch.leaks + ssh_watch.leaks

    # The scan can fail: it finds each credential where it does live.
    assert needles.find((secrets / "token").read_bytes()) == ["git token"]
    assert "webhook secret" in needles.find((secrets / "webhook").read_bytes())
    assert needles.find(status_api.received[0].headers["authorization"].encode()) == ["commit status token"]
    assert "SSH private key line 1" in needles.find(sshd.client_key.read_bytes())
    secret_json = gpu_east.kubectl(*get_probe).stdout
    assert "Secret data (base64)" in needles.find(secret_json.encode())
    assert "Kubernetes bearer token" in needles.find(gpu_east.kubeconfig.read_bytes())

    # Each surface was really there to be scanned.
    text = b"\n".join(surfaces[f"log {log.name}"] for log in logs)
    assert b'"trace_id"' in text, "the console exporter wrote spans into the log"
    assert b"webhook from 127.0.0.1: 202 accepted" in text
    assert b"Drift" in surfaces["Events"] and b"single-gpu" in surfaces["Events"]
    programs = https_watch.programs() | ssh_watch.programs()
    assert {"git", "ssh", "helm"} <= programs, programs
    print(
        f"scanned {len(surfaces)} surfaces ({sum(len(d) for d in surfaces.values()) / 1e6:.1f} MB) for "
        f"{len(needles.variants())} needles; /proc sampled {https_watch.rounds + ssh_watch.rounds} times, "
        f"{len(https_watch.seen) + len(ssh_watch.seen)} processes: {sorted(programs)}"
    )
    assert leaks == [], "\n".join(leaks)

    # The Secret a person made in a managed namespace is untouched.
    probe_after = json.loads(secret_json)
    assert probe_after["metadata"]["resourceVersion"] == probe_before["metadata"]["resourceVersion"]
    assert probe_after["metadata"]["uid"] == probe_before["metadata"]["uid"]


# --- the flood ------------------------------------------------------------------------------


def lag_and_health(
    running: Running, stop: threading.Event, lags: list[float], health: list[float], failed: list[str]
) -> None:
    """Until ``stop``: every 0.25 s /healthz's latency (or why it failed) and the loop-lag gauge
    (deduplicated per 0.5 s measurement)."""
    last: float | None = None
    while not stop.is_set():
        start = time.monotonic()
        try:
            running.get("/healthz")
        except OSError as err:
            failed.append(f"{time.monotonic() - start:.1f}s: {err}")
        else:
            health.append(time.monotonic() - start)
        with contextlib.suppress(OSError):
            lag = running.metrics()["fleet_loop_lag_seconds{}"]
            if lag != last:
                lags.append(lag)
                last = lag
        stop.wait(0.25)


def liveness_timeout() -> float:
    """Seconds the kubelet gives the installed controller's liveness probe (``timeoutSeconds``, default 1)."""
    for doc in yaml.safe_load_all((ROOT / "overlays" / "base" / "controller.yaml").read_text()):
        if doc and doc["kind"] == "Deployment":
            [container] = doc["spec"]["template"]["spec"]["containers"]
            return float(container["livenessProbe"].get("timeoutSeconds", 1))
    raise AssertionError("overlays/base/controller.yaml has no Deployment")


def fetches(running: Running) -> float:
    """Git fetches the controller has finished."""
    return running.metrics().get("fleet_git_fetch_duration_seconds_count{}", 0.0)


def oversized(running: Running) -> int:
    """The status answered to a signed-looking push declaring a 5 MB body (none of it sent)."""
    with socket.create_connection(("127.0.0.1", running.port), timeout=10) as conn:
        conn.sendall(
            b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\nX-Hub-Signature-256: sha256=00\r\n"
            b"Content-Length: 5000000\r\n\r\n"
        )
        return int(conn.recv(4096).split()[1])


def reconciles(running: Running) -> float:
    return sum(v for k, v in running.metrics().items() if k.startswith("fleet_reconcile_duration_seconds_count"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def test_webhook_refuses_attacks_and_survives_a_flood_while_reconciling(gpu_east: Sandbox, tmp_path: Path) -> None:
    secret = b"flood-secret-" + os.urandom(4).hex().encode()
    (tmp_path / "webhook").write_bytes(secret)
    rendered = gpu_east.kubectl("kustomize", str(ROOT / "overlays" / "single-replica")).stdout
    gpu_east.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=rendered)
    established(gpu_east.kubectl, "fleetsyncs.fleet.gpufleet.dev")
    upstream = Upstream(tmp_path / "upstream")
    first = example_into(upstream, chart_repository=None)
    # A 10-minute poll: during the flood only the webhook can announce the new commit.
    with controller(
        gpu_east, tmp_path, "flood", repo=upstream.url, ref="main", interval="10m", resync="10m",
        webhook_secret_file=str(tmp_path / "webhook"),
    ) as running:  # fmt: skip
        running.wait_for(lambda: applied(gpu_east, first), within=300, what=f"Ready at {first}")

        # Forged, oversized and replayed deliveries, against the real process.
        body = push_body(first)
        fetched = fetches(running)
        assert running.post(body, github(body, secret=b"not-the-secret", delivery="f-1"))[0] == 401
        assert oversized(running) == 413
        assert running.post(body, github(body, secret=secret, delivery="f-3")) == (
            202,
            {"result": "accepted", "reason": "push to refs/heads/main"},
        )
        assert running.post(body, github(body, secret=secret, delivery="f-3"))[0] == 409, "the same delivery"
        assert running.post(body, github(body, secret=secret, delivery="f-4"))[0] == 409, "a fresh id, the same body"
        counted = running.metrics()
        for result, n in (("unauthorized", 1), ("too-large", 1), ("accepted", 1), ("replayed", 2)):
            assert counted[f"fleet_webhook_requests_total{{result={result}}}"] == n, (result, counted)
        # The accepted webhook woke one fetch; it finds nothing new, so no reconcile follows it.
        running.wait_for(lambda: fetches(running) > fetched, within=30, what="the fetch the webhook woke")

        before = reconciles(running)
        stop = threading.Event()
        lags: list[float] = []
        health: list[float] = []
        failed: list[str] = []
        sampler = threading.Thread(target=lag_and_health, args=(running, stop, lags, health, failed), daemon=True)
        flood = subprocess.Popen(
            [sys.executable, "-m", "tests.install.flood", "--port", str(running.port), "--rate", "1000",
             "--seconds", "30"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        flood_start = time.monotonic()
        sampler.start()
        try:
            time.sleep(3)
            second = upstream.commit({"teams/ml-research/flood-probe.yaml": PROBE.format(name="flood-probe")})
            body = push_body(second)
            attempts = 0
            while True:
                attempts += 1
                with contextlib.suppress(OSError):
                    if running.post(body, github(body, secret=secret, delivery="during-flood"))[0] == 202:
                        break
                assert attempts < 50, "the genuine webhook never got through the flood"
                time.sleep(0.2)
            announced = time.monotonic()
            running.wait_for(lambda: applied(gpu_east, second), within=25, what="the commit applied in the flood")
            took_commit = time.monotonic() - announced
            gpu_east.kubectl("delete", "resourceclaimtemplate", "-n", "inference", "single-gpu")
            drift_at = time.monotonic()
            running.wait_for(
                lambda: (
                    gpu_east.kubectl(
                        "get", "resourceclaimtemplate", "-n", "inference", "single-gpu", check=False
                    ).returncode
                    == 0
                ),
                within=max(1.0, flood_start + 30 - time.monotonic()),
                what="the drift repaired during the flood",
            )
            took_drift = time.monotonic() - drift_at
            assert flood.poll() is None, "the flood was still going when both had happened"
            out, err = flood.communicate(timeout=120)
            assert flood.returncode == 0, err.decode()[-2000:]
        finally:
            stop.set()
            sampler.join(timeout=15)
            if flood.poll() is None:
                os.killpg(flood.pid, signal.SIGKILL)
                flood.wait(timeout=10)
        running.alive()
        after = reconciles(running)
        result = json.loads(out.decode().strip().splitlines()[-1])
        counted = running.metrics()
        print(
            f"\nflood: {result['answered']} answers in {result['seconds']} s = {result['rate']} req/s "
            f"(asked 1000), statuses {result['statuses']}, connection errors {result['errors']}\n"
            f"genuine webhook through in {attempts} attempt(s); commit applied {took_commit:.1f}s after it, "
            f"drift repaired in {took_drift:.1f}s; reconciles during the flood: {after - before:g}\n"
            f"loop lag over {len(lags)} measurements: p50 {percentile(lags, 0.5) * 1000:.1f} ms, "
            f"p99 {percentile(lags, 0.99) * 1000:.1f} ms, max {max(lags) * 1000:.1f} ms; /healthz over "
            f"{len(health)} probes: p50 {percentile(health, 0.5) * 1000:.1f} ms, "
            f"p99 {percentile(health, 0.99) * 1000:.1f} ms; median {statistics.median(health) * 1000:.1f} ms"
        )
        assert result["answered"] >= 0.9 * result["sent"], result
        assert counted["fleet_webhook_requests_total{result=unauthorized}"] >= result["statuses"].get("401", 0)
        assert after - before >= 2, "the commit and the drift were each reconciled"
        assert lags, "the loop lag was measured during the flood"
        # An answer slower than the liveness probe's timeout is a failed probe (enough in a row: a restart).
        assert health and not failed, f"/healthz failed during the flood: {failed}"
        timeout = liveness_timeout()
        slow = [f"{s:.2f}s" for s in health if s >= timeout]
        assert not slow, f"/healthz answered after the liveness probe's {timeout:g}s timeout: {slow}"
        log = running.log.read_text()
        refused_lines = log.count("webhook from 127.0.0.1: 401") + log.count("Invalid HTTP request received")
        print(f"log lines about refused requests during the flood: {refused_lines}")
        assert refused_lines < 50, "refused requests are logged at most once per 10 s"
