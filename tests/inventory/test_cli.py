"""``fleetctl inventory`` against the sandbox: the table, and a snapshot validate can read back."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from fleet.inventory import snapshots
from fleet.sandbox import Sandbox
from tests.sandbox import guide

pytestmark = pytest.mark.sandbox


def fleetctl(sandbox: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "fleetctl", "inventory", "--kubeconfig", str(sandbox.kubeconfig), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_snapshot_holds_every_published_device(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    done = fleetctl(sandbox, "-o", "yaml")
    assert done.returncode == 0, done.stderr
    inventory, cluster = snapshots.load(done.stdout)
    assert cluster
    published = guide.published_devices(kubectl)
    assert {(d.pool, d.name) for d in inventory.devices} == set(published)


def test_table_lists_nodes_and_models(sandbox: Sandbox, kubectl: Callable[..., Any]) -> None:
    done = fleetctl(sandbox)
    assert done.returncode == 0, done.stderr
    nodes = {s["spec"]["nodeName"] for s in guide.get_json(kubectl, "resourceslices")["items"]}
    lines = done.stdout.split("\n\n")[0].splitlines()  # the node table; allocations follow
    assert lines[0].split() == ["NODE", "DRIVER", "MODEL", "TYPE", "DEVICES"]
    assert nodes == {
        line.split()[0]
        for line in lines[1:]
        if line and not line[0].isdigit() and " " in line and not line.startswith("note")
    } - {""}
    assert "NVIDIA H200" in done.stdout


def test_unreachable_cluster_is_a_usage_error(tmp_path: Any) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: x, context: {cluster: x, user: x}}]\nusers: [{name: x, user: {token: t}}]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "fleetctl", "inventory", "--kubeconfig", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "error:" in done.stderr
