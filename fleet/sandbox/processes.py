"""Starting, probing and stopping the sandbox's component processes.

Each component runs in its own session (``start_new_session``), so it and any
child it forks form one process group that ``stop`` can signal as a whole:
SIGTERM, a grace period, then SIGKILL. Output goes to ``logs/<component>.log``;
when a component does not become ready, ``StartError`` carries the tail of that
log so the reason (a port in use, a bad flag) is on the user's screen.

Before signalling a recorded pid we check that it still runs the binary we
started: a pid reused by an unrelated process after a reboot is never killed.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from fleet.sandbox.errors import StartError


@dataclass(frozen=True)
class Running:
    """A started component: what to show, where its log is, how to tell it is still ours."""

    name: str
    pid: int
    binary: str
    log: Path


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_ports = random.SystemRandom()


def ephemeral_ports(path: Path = EPHEMERAL_RANGE) -> range:
    """The ports the kernel hands out as the local end of outgoing connections (Linux's default if unknown)."""
    with contextlib.suppress(OSError, ValueError):
        low, high = (int(n) for n in path.read_text().split())
        return range(low, high + 1)
    return range(32768, 61000)


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on, outside the kernel's ephemeral range.

    A server restarted on its port (kube-apiserver in the fault tests, Gitea) leaves the port
    free for a moment. A port from the ephemeral range can then become the local end of any
    outgoing connection, or of a client's own retry that connects to itself, and the server
    fails to listen again ("address already in use"). Ports outside that range are never
    handed out that way.
    """
    ephemeral = ephemeral_ports()
    for _ in range(200):
        port = _ports.randrange(10000, 65536)
        if port not in ephemeral and not port_in_use(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def start(name: str, argv: list[str], *, logs: Path, env: dict[str, str] | None = None) -> Running:
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            env=env,
        )
    running = Running(name=name, pid=proc.pid, binary=argv[0], log=log)
    # Until the child has exec'd, /proc shows our own command line; wait for the exec so
    # that ``alive`` (which checks the binary to guard against pid reuse) is meaningful.
    deadline = time.monotonic() + 5
    while not alive(running) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return running


def alive(running: Running) -> bool:
    """True when the pid exists, is not a zombie and still runs our binary."""
    try:
        argv = Path(f"/proc/{running.pid}/cmdline").read_bytes().split(b"\0")[:2]
        stat = Path(f"/proc/{running.pid}/stat").read_text()
    except (OSError, UnicodeDecodeError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    # argv[1] too: an interpreted program (a script) shows its interpreter first.
    return running.binary.encode() in argv and state != "Z"


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def stop(running: Running, *, grace: float = 10.0) -> None:
    """Stop a component's whole process group; a no-op if it is gone or no longer ours.

    Waits on the *group*, not the leader: a leader that is exiting already shows an
    empty command line while the kernel still lists it, and children outlive leaders.
    """
    if not alive(running):
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(running.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(running.pid, os.WNOHANG)
            if not group_members(running.pid):
                return
            time.sleep(0.05)


def group_members(pgid: int) -> list[int]:
    """Every pid whose process group is ``pgid`` (to prove ``down`` left nothing behind)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry.name))
    return out


def probe(url: str, *, ca_file: Path | None = None, insecure: bool = False, timeout: float = 2.0) -> bool:
    """GET a health endpoint; True on HTTP 200.

    A CA file still being written by the component (kube-apiserver writes its self-signed
    certificate as it starts) holds no certificate yet: not ready, not an error.
    """
    context = None
    try:
        if url.startswith("https"):
            context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
            if insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def wait_ready(
    running: Running, url: str, *, timeout: float, ca_file: Path | None = None, insecure: bool = False
) -> float:
    """Poll ``url`` until it answers 200; StartError with the log tail if the process dies or time runs out."""
    started = time.monotonic()
    while True:
        if not alive(running):
            raise StartError(
                f"{running.name} exited during start-up",
                where=str(running.log),
                hint=f"its log ends with:\n{log_tail(running.log)}",
            )
        ca = ca_file if ca_file is None or ca_file.exists() else None
        if (ca_file is None or ca is not None or insecure) and probe(url, ca_file=ca, insecure=insecure):
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise StartError(
                f"{running.name} not ready after {timeout:.0f} s ({url})",
                where=str(running.log),
                hint=f"its log ends with:\n{log_tail(running.log)}",
            )
        time.sleep(0.2)


__all__ = [
    "Running",
    "alive",
    "ephemeral_ports",
    "free_port",
    "group_members",
    "log_tail",
    "port_in_use",
    "probe",
    "start",
    "stop",
    "wait_ready",
]
