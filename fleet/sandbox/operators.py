"""A stand-in for the GPU Operator's controller: marks ``GPUCluster gpu-cluster`` Ready.

The sandbox has no GPUs, so no real operator could ever make its operands ready. The
stand-in does the one thing fleet's readiness gate waits for from the operator itself:
once the chart has created ``gpu-cluster``, it writes the status the real controller
writes when its operands run (``state: ready``, condition ``Ready=True``, reason
``Reconciled``). The kubelet-plugin DaemonSet's pods are run by KWOK, the DeviceClasses
and ResourceSlices are the sandbox's own. Tests and ``fleetctl demo`` start it; the
gate's failure paths are tested without it.
"""

from __future__ import annotations

import json
import threading
from types import TracebackType

from fleet.sandbox.clusters import Sandbox

READY = {
    "status": {
        "state": "ready",
        "namespace": "gpu-operator",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Reconciled",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
            {
                "type": "Error",
                "status": "False",
                "reason": "Reconciled",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
        ],
    }
}


class StandInOperator:
    """``with StandInOperator(sb):`` keeps gpu-cluster Ready while the block runs (a thread, polling each second)."""

    def __init__(self, sandbox: Sandbox, *, interval: float = 1.0) -> None:
        self.sandbox = sandbox
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stand-in-operator", daemon=True)

    def __enter__(self) -> StandInOperator:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.reconcile()
            self._stop.wait(self.interval)

    def reconcile(self) -> bool:
        """Mark gpu-cluster Ready if it exists and is not; True when a write was made."""
        got = self.sandbox.kubectl("get", "gpuclusters.nvidia.com", "gpu-cluster", "-o", "json", check=False)
        if got.returncode != 0:
            return False
        state = (json.loads(got.stdout).get("status") or {}).get("state")
        if state == "ready":
            return False
        self.sandbox.kubectl(
            "patch",
            "gpuclusters.nvidia.com",
            "gpu-cluster",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(READY),
            check=False,
        )
        return True


__all__ = ["READY", "StandInOperator"]
