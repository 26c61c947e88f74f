"""Jaeger: the trace backend the controller's OTLP is tested against, built from its Go module.

Jaeger publishes its binary on GitHub releases and as images, neither reachable where fleet
is built, so ``tools/jaeger`` is a tiny module holding ``cmd/jaeger`` (Jaeger v2, an
OpenTelemetry Collector distribution) as a Go tool at the version in ``versions.JAEGER``;
``build`` compiles it once per version and module hash into ``$FLEET_CACHE_DIR``, with a
``.complete`` marker written last, as ``binaries`` does for the control plane.

``serve`` runs it with memory storage on free loopback ports, and only what a test needs:
the OTLP/HTTP receiver and the query service (HTTP API and its gRPC twin, which Jaeger
always opens). Its own telemetry (metrics on 8888, self-traces) is off, so two of them,
or one beside another collector, never fight over a fixed port.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fleet.sandbox import binaries, processes, versions
from fleet.sandbox.errors import BuildError, StartError

MODULE = binaries._TOOLS / "jaeger"
PACKAGE = "github.com/jaegertracing/jaeger/cmd/jaeger"


def cache_dir() -> Path:
    return binaries.cache_root() / f"jaeger-{versions.JAEGER}-{binaries._module_hash(MODULE)}"


def locate() -> Path | None:
    """The built ``jaeger`` binary, or None."""
    root = cache_dir()
    return root / "bin" / "jaeger" if (root / ".complete").exists() else None


def build(*, progress: binaries.Progress = binaries._stderr, force: bool = False) -> tuple[Path, dict[str, float]]:
    """Build ``jaeger`` if it is missing (or ``force``); its path and the step's timing."""
    found = None if force else locate()
    if found is not None:
        return found, {}
    with binaries._build_lock(progress):
        found = None if force else locate()
        if found is not None:
            return found, {}
        root = cache_dir()
        staging = root.with_name(root.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "bin").mkdir(parents=True)
        took = binaries._run(
            f"go build jaeger {versions.JAEGER}",
            ["nice", "-n", "10", "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", f"{staging / 'bin'}/", PACKAGE],
            cwd=MODULE,
            env=binaries._go_env(),
            progress=progress,
        )
        (staging / ".complete").write_text(versions.JAEGER)
        shutil.rmtree(root, ignore_errors=True)
        staging.rename(root)
    found = locate()
    if found is None:
        raise BuildError("jaeger missing after the build", where=str(root), hint="run `fleetctl sandbox build --force`")
    return found, {"jaeger": took}


@dataclass(frozen=True)
class Jaeger:
    """A running Jaeger: where to send OTLP/HTTP and where to query."""

    otlp_endpoint: str
    """``OTEL_EXPORTER_OTLP_ENDPOINT`` for it (``/v1/traces`` is appended by the exporter)."""
    query_url: str
    """The query service: ``{query_url}/api/traces/{trace id}``."""
    log: Path


def config(*, otlp: int, query: int, query_grpc: int) -> dict[str, object]:
    """The collector configuration ``serve`` writes: OTLP/HTTP in, memory storage, the query service."""
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query"],
            "pipelines": {
                "traces": {"receivers": ["otlp"], "processors": ["batch"], "exporters": ["jaeger_storage_exporter"]}
            },
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "info"}},
        },
        "extensions": {
            "jaeger_storage": {"backends": {"memstore": {"memory": {"max_traces": 100000}}}},
            "jaeger_query": {
                "storage": {"traces": "memstore"},
                "enable_tracing": False,
                "http": {"endpoint": f"127.0.0.1:{query}"},
                "grpc": {"endpoint": f"127.0.0.1:{query_grpc}"},
            },
        },
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"127.0.0.1:{otlp}"}}}},
        "processors": {"batch": {}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "memstore"}},
    }


@contextlib.contextmanager
def serve(directory: Path, *, binary: Path | None = None, timeout: float = 60.0) -> Iterator[Jaeger]:
    """Run Jaeger until the block ends; its config and log in ``directory``."""
    binary = binary or build()[0]
    directory.mkdir(parents=True, exist_ok=True)
    otlp, query, query_grpc = (processes.free_port() for _ in range(3))
    path = directory / "jaeger.json"  # YAML is a superset of JSON: the collector reads it as is
    path.write_text(json.dumps(config(otlp=otlp, query=query, query_grpc=query_grpc), indent=1))
    running = processes.start("jaeger", [str(binary), "--config", str(path)], logs=directory)
    try:
        base = f"http://127.0.0.1:{query}"
        processes.wait_ready(running, f"{base}/api/services", timeout=timeout)
        _wait_port(running, otlp, timeout=timeout)
        yield Jaeger(otlp_endpoint=f"http://127.0.0.1:{otlp}", query_url=base, log=running.log)
    finally:
        processes.stop(running)


def _wait_port(running: processes.Running, port: int, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return
        if time.monotonic() > deadline or not processes.alive(running):
            raise StartError(
                f"jaeger's OTLP receiver does not answer on 127.0.0.1:{port}",
                where=str(running.log),
                hint=f"its log ends with:\n{processes.log_tail(running.log)}",
            )
        time.sleep(0.1)


__all__ = ["PACKAGE", "Jaeger", "build", "cache_dir", "config", "locate", "serve"]
