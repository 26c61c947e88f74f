"""``fleetctl sandbox`` as users run it: up twice, down leaves nothing, ports in use, bad profiles."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.sandbox import clusters, processes, profiles

pytestmark = pytest.mark.sandbox


def fleetctl(*args: str, env_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, FLEET_SANDBOX_DIR=str(env_dir), NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "fleetctl", *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def test_up_twice_then_down_leaves_no_process(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    first = fleetctl("sandbox", "up", "--profile", str(_profile(tmp_path, "pools: {h100x1: 1}")), env_dir=d)
    assert first.returncode == 0, first.stderr
    state = json.loads((d / "state.json").read_text())
    pids = [c["pid"] for c in state["components"]]
    assert [c["name"] for c in state["components"]] == [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
    ]

    second = fleetctl("sandbox", "up", "--profile", str(_profile(tmp_path, "pools: {h100x1: 1}")), env_dir=d)
    assert second.returncode == 0, second.stderr
    assert "already up" in second.stderr
    assert [c["pid"] for c in json.loads((d / "state.json").read_text())["components"]] == pids

    status = fleetctl("sandbox", "status", "-o", "json", env_dir=d)
    assert status.returncode == 0
    st = json.loads(status.stdout)
    assert st["up"] and st["nodes"] == 2 and st["devices"] == 1  # the GPU node and the default system node
    assert st["cpu_pools"] == {"system": 1}

    env = fleetctl("sandbox", "env", env_dir=d)
    assert f"export KUBECONFIG={d / 'kubeconfig'}" in env.stdout

    down = fleetctl("sandbox", "down", env_dir=d)
    assert down.returncode == 0, down.stderr
    assert not d.exists()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or processes.group_members(pid) == []
    again = fleetctl("sandbox", "down", env_dir=d)
    assert again.returncode == 0 and "no sandbox" in again.stderr


def test_up_over_a_dead_sandbox_cleans_and_restarts(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    sb = clusters.up(directory=d, profile=profiles.parse({"pools": {"l4x1": 1}}))
    try:
        apiserver = next(c for c in sb.components if c.name == "kube-apiserver")
        processes.stop(apiserver)
        assert not sb.healthy()
        again = clusters.up(directory=d, profile=profiles.parse({"pools": {"l4x1": 1}}))
        assert again.healthy()
        assert all(c.pid != apiserver.pid for c in again.components)
    finally:
        clusters.down(directory=d)


def test_a_ca_file_still_empty_is_not_ready_rather_than_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "apiserver.crt"
    empty.write_text("")  # kube-apiserver has created it and not written it yet
    assert processes.probe("https://127.0.0.1:1/readyz", ca_file=empty) is False


def test_apiserver_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = fleetctl("sandbox", "up", "--apiserver-port", str(port), env_dir=d)
    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "--apiserver-port" in result.stderr
    assert not (d / "state.json").exists()


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("pools: {v100x8: 1}", ["pools.v100x8", "unknown GPU pool", "allowed pools: h100x1"]),
        ("pools: {h100x8: -2}", ["pools.h100x8", "whole number ≥ 0"]),
        ("pools: {h100x3: 1}", ["pools.h100x3", "(1, 2, 4, 8)"]),
        ("pools: {h100x8: [1}", ["invalid YAML"]),
        ("pool: {h100x8: 1}", ["unknown field 'pool'", "the fields are 'pools' and 'cpuPools'"]),
        ("pools: {h100x8: 1}\ncpuPools: {system: -1}", ["cpuPools.system", "whole number ≥ 0"]),
        ("pools: {h100x8: 1}\ncpuPools: {Sys_1: 1}", ["cpuPools.Sys_1", "not a DNS label"]),
        ("pools: {h100x8: 1}\ncpuPools: {h100x1: 1}", ["cpuPools.h100x1", "reads as a GPU pool"]),
        ("pools: {h100x8: 1}\ncpuPools: [system]", ["cpuPools", "mapping of pool name"]),
    ],
)
def test_malformed_profile_fails_before_anything_starts(tmp_path: Path, profile: str, expected: list[str]) -> None:
    d = tmp_path / "sb"
    path = _profile(tmp_path, profile)
    result = fleetctl("sandbox", "up", "--profile", str(path), env_dir=d)
    assert result.returncode == 2
    for text in expected:
        assert text in result.stderr, result.stderr
    assert str(path) in result.stderr
    assert not d.exists()


def _profile(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(text + "\n")
    return path
