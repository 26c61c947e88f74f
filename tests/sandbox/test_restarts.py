"""Stopping and starting one component of a sandbox that runs Gitea: ports and data kept.

Apart from ``test_lifecycle.py`` because it needs the built Gitea (``extras``): a file holds
extras tests only (tests/conftest.py), so the suite's workers take it last, whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.sandbox import SandboxError, clusters, processes, profiles
from tests.waits import wait_for

pytestmark = pytest.mark.sandbox


@pytest.mark.extras("gitea")
def test_etcd_apiserver_and_gitea_stop_and_start_on_their_ports_with_their_data(tmp_path: Path) -> None:
    d = tmp_path / "sb"
    flag = "--watch-cache-sizes=configmaps#0"
    profile = profiles.parse({"pools": {"l4x1": 1}})
    sb = clusters.up(directory=d, profile=profile, apiserver_flags=(flag,), forge=True)
    try:
        sb.kubectl("create", "configmap", "kept", "-n", "default", "--from-literal=a=1")
        with pytest.raises(SandboxError, match="still running"):
            clusters.start_component(sb, "etcd")
        assert sb.forge is not None
        sb.forge.api().create_repository("kept")
        with pytest.raises(SandboxError, match="choose one of etcd, kube-apiserver, gitea"):
            clusters.stop_component(sb, "kwok")
        before = {c.name: c.pid for c in sb.components}
        for name in clusters.RESTARTABLE:
            old = next(c for c in sb.components if c.name == name)
            clusters.stop_component(sb, name, grace=2)
            assert not processes.alive(old)
            clusters.start_component(sb, name)
        wait_for(sb.healthy, within=60, what="the sandbox healthy after the restarts")
        saved = clusters.Sandbox.load(d)
        assert saved is not None and saved.ports == sb.ports and saved.apiserver_flags == [flag]
        after = {c.name: c.pid for c in saved.components}
        assert {n for n in after if after[n] != before[n]} == set(clusters.RESTARTABLE)
        apiserver = next(c for c in saved.components if c.name == "kube-apiserver")
        assert flag.encode() in Path(f"/proc/{apiserver.pid}/cmdline").read_bytes().split(b"\0")
        got = sb.kubectl("get", "configmap", "kept", "-n", "default", "-o", "jsonpath={.data.a}")
        assert got.stdout == "1", "etcd came back with its data"
        assert saved.forge == sb.forge and saved.forge is not None
        assert saved.forge.api().call("GET", "/repos/fleet/kept")["private"], "Gitea came back with its data and token"
    finally:
        clusters.down(directory=d)
