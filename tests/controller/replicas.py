"""Real ``fleet-controller`` processes (``python -m fleet.controller``) for one cluster, and what
tests read about them from the API server: the Lease holder, FleetSync readiness, the spans
they printed.

``Replicas.start(identity)`` starts one replica following a ``Remote`` against the sandbox,
its output (logs, and with ``traces=True`` its OpenTelemetry spans printed by the console
exporter) in ``<root>/<identity>.log``; ``kill`` sends SIGKILL to its process group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from fleet.sandbox import Sandbox, credentials
from tests.controller.conftest import Remote


class Replicas:
    def __init__(self, sandbox: Sandbox, remote: Remote, cluster: str, root: Path) -> None:
        self.sandbox, self.remote, self.cluster, self.root = sandbox, remote, cluster, root
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(
        self, identity: str, *args: str, traces: bool = False, otel: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start replica ``identity``; ``args`` are further flags (``--lease-duration 10s``...), ``otel``
        its ``OTEL_*`` variables (none of the test's own are passed on)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "OTEL_")) and k != "KUBECONFIG"}
        if traces:
            env.update(OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="fleet-controller")
        env.update(otel or {})
        argv = [
            sys.executable, "-m", "fleet.controller",
            "--repo", self.remote.url, "--ref", "main", "--cluster", self.cluster,
            "--interval", "1s", "--health-timeout", "30s",
            "--kubeconfig", str(self.sandbox.kubeconfig), "--context", credentials.CLUSTER,
            "--listen", "127.0.0.1:0", "--identity", identity,
            "--state-dir", str(self.root / identity),
            *args,
        ]  # fmt: skip
        log = (self.root / f"{identity}.log").open("wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.procs[identity] = proc
        return proc

    def kill(self, identity: str) -> None:
        """SIGKILL the replica (its whole process group: helm or git children die with it)."""
        proc = self.procs[identity]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def log(self, identity: str, *, tail: int = 4000) -> str:
        return (self.root / f"{identity}.log").read_text(errors="replace")[-tail:]

    def spans(self, identity: str) -> list[dict[str, Any]]:
        """The spans replica ``identity`` printed (``traces=True``), in the order they ended."""
        return console_spans((self.root / f"{identity}.log").read_text(errors="replace"))

    def lease(self) -> dict[str, Any]:
        out = self.sandbox.kubectl(
            "get", "lease", "-n", "fleet-system", f"fleet-{self.cluster}", "-o", "json", check=False
        )
        return dict(json.loads(out.stdout).get("spec") or {}) if out.returncode == 0 else {}

    def holder(self) -> str:
        return str(self.lease().get("holderIdentity") or "")

    def acquired(self) -> datetime:
        """When the holder took the Lease, as it wrote it (``acquireTime``)."""
        return datetime.fromisoformat(str(self.lease()["acquireTime"]).replace("Z", "+00:00"))

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


@pytest.fixture()
def replicas(sandbox: Sandbox, remote: Remote, tmp_path: Path) -> Iterator[Replicas]:
    """Replicas for a fresh cluster name (so a fresh Lease and ledger); all SIGKILLed afterwards."""
    r = Replicas(sandbox, remote, f"t-{os.urandom(3).hex()}", tmp_path)
    try:
        yield r
    finally:
        r.stop()


def console_spans(text: str) -> list[dict[str, Any]]:
    """Spans printed by OpenTelemetry's ``ConsoleSpanExporter`` (indented JSON objects, each
    starting with a line ``{`` and ending with a line ``}``), among other output lines."""
    spans: list[dict[str, Any]] = []
    lines: list[str] | None = None
    for line in text.splitlines():
        if lines is None:
            if line == "{":
                lines = [line]
            continue
        lines.append(line)
        if line == "}":
            with contextlib.suppress(ValueError):  # cut short by a SIGKILL
                spans.append(json.loads("\n".join(lines)))
            lines = None
    return spans


def ready_at(sandbox: Sandbox, cluster: str, revision: str) -> bool:
    out = sandbox.kubectl("get", "fleetsync", cluster, "-o", "json", check=False)
    if out.returncode != 0:
        return False
    status = json.loads(out.stdout).get("status") or {}
    ready = [c["status"] for c in status.get("conditions") or () if c["type"] == "Ready"]
    return ready == ["True"] and status.get("lastAppliedRevision") == revision


def templates(sandbox: Sandbox, namespace: str) -> int:
    out = sandbox.kubectl("get", "resourceclaimtemplates", "-n", namespace, "-o", "name", check=False)
    return len(out.stdout.split())
