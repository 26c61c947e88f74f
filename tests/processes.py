"""Stopping a process a test started: SIGTERM, as a kubelet would, then its whole group if it hangs."""

from __future__ import annotations

import os
import signal
import subprocess


def stop(proc: subprocess.Popen[bytes] | subprocess.Popen[str], *, grace: float = 30.0) -> None:
    """SIGTERM ``proc`` and wait ``grace`` seconds; then SIGKILL its process group (it was started in one)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace)
