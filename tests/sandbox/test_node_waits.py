"""`clusters.wait_nodes_ready` bounds a stall, not the whole wait (pure: a stand-in for kubectl's listing).

A thousand KWOK nodes turn Ready over minutes on two cores; the wait must go on while they do
and give up, naming what is missing, only when none turned Ready for `timeout` seconds.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fleet.sandbox import clusters
from fleet.sandbox.errors import StartError


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class _Nodes:
    """A sandbox whose `kubectl get nodes` shows one more node Ready every `every` listings."""

    def __init__(self, names: list[str], *, every: int, stop_at: int | None = None) -> None:
        self.names, self.every, self.stop_at, self.calls = names, every, stop_at, 0
        self.server, self.directory = "https://127.0.0.1:1", Path("/nowhere")

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.calls += 1
        ready = min(len(self.names), self.calls // self.every)
        if self.stop_at is not None:
            ready = min(ready, self.stop_at)
        items = [
            {
                "metadata": {"name": name},
                "spec": {"taints": [] if i < ready else [{"key": "node.kubernetes.io/not-ready"}]},
                "status": {"conditions": [{"type": "Ready", "status": "True" if i < ready else "False"}]},
            }
            for i, name in enumerate(self.names)
        ]
        return subprocess.CompletedProcess(args, 0, json.dumps({"items": items}), "")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    c = _Clock()
    monkeypatch.setattr(clusters.time, "monotonic", c.monotonic)
    monkeypatch.setattr(clusters.time, "sleep", c.sleep)
    return c


def test_a_slow_steady_start_is_waited_for(clock: _Clock) -> None:
    names = [f"gpu-{i:04d}" for i in range(200)]
    sb = _Nodes(names, every=10)  # one node per 20 s of listings: 4,000 s in all, never 120 s without one
    clusters.wait_nodes_ready(sb, set(names), timeout=120)  # type: ignore[arg-type]
    assert clock.now > 120


def test_a_stall_fails_naming_what_is_missing(clock: _Clock) -> None:
    names = [f"gpu-{i:04d}" for i in range(200)]
    sb = _Nodes(names, every=1, stop_at=150)
    with pytest.raises(StartError) as raised:
        clusters.wait_nodes_ready(sb, set(names), timeout=120)  # type: ignore[arg-type]
    text = str(raised.value)
    assert "50 of 200 nodes not Ready, none turned Ready in 120 s" in text
    assert "gpu-0150" in text and "and 40 more" in text
    assert 150 + 120 <= clock.now <= 150 * 2 + 130
