"""The control plane is built from Go modules at the pinned version, and failures are readable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.sandbox import Sandbox, binaries, processes, releases, versions
from fleet.sandbox.errors import StartError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.sandbox
def test_server_reports_the_pinned_version(sandbox: Sandbox) -> None:
    assert sandbox.kubernetes == releases.select().version  # FLEET_KUBERNETES's, else versions.KUBERNETES
    out = json.loads(sandbox.kubectl("version", "-o", "json").stdout)
    assert out["serverVersion"]["gitVersion"] == sandbox.kubernetes
    assert out["clientVersion"]["gitVersion"] == sandbox.kubernetes


@pytest.mark.sandbox
def test_helm_and_kwok_are_the_pinned_versions(sandbox: Sandbox) -> None:
    helm = subprocess.run(
        [str(sandbox.binary("helm")), "version", "--short"], capture_output=True, text=True, check=True
    )
    assert helm.stdout.startswith(versions.HELM)
    api = sandbox.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout.split()
    assert {
        "deviceclasses.resource.k8s.io",
        "resourceclaims.resource.k8s.io",
        "resourceclaimtemplates.resource.k8s.io",
        "resourceslices.resource.k8s.io",
    } <= set(api)


def test_go_module_replace_list_is_generated_for_the_pinned_version() -> None:
    check = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "ktestenv" / "gomod.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    gomod = (ROOT / "tools" / "ktestenv" / "go.mod").read_text()
    assert f"k8s.io/kubernetes {versions.KUBERNETES}" in gomod
    staging = "v0." + versions.KUBERNETES.removeprefix("v1.")
    assert f"k8s.io/api => k8s.io/api {staging}" in gomod
    assert f"k8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation {staging}" in gomod


def test_official_binaries_in_fleet_kube_bin_are_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = binaries.locate()
    assert built is not None, "run `fleetctl sandbox build` first (./dev does)"
    for name in binaries.CONTROL_PLANE:
        (tmp_path / name).symlink_to(built[name])
    monkeypatch.setenv("FLEET_KUBE_BIN", str(tmp_path))
    found = binaries.locate()
    assert found is not None
    assert all(found[n] == tmp_path / n for n in binaries.CONTROL_PLANE)
    assert found["kwok"] == built["kwok"]


def test_a_component_that_dies_at_start_shows_its_log_tail(tmp_path: Path) -> None:
    script = tmp_path / "fake-apiserver"
    script.write_text("#!/bin/sh\necho 'E0101 listen tcp 127.0.0.1:6443: bind: address already in use'\nexit 1\n")
    script.chmod(0o755)
    running = processes.start("kube-apiserver", [str(script)], logs=tmp_path / "logs")
    with pytest.raises(StartError) as err:
        processes.wait_ready(running, "https://127.0.0.1:1/readyz", timeout=10)
    text = str(err.value)
    assert "kube-apiserver exited during start-up" in text
    assert "address already in use" in text
    assert str(tmp_path / "logs" / "kube-apiserver.log") in text


def test_stop_kills_the_whole_process_group(tmp_path: Path) -> None:
    script = tmp_path / "parent"
    script.write_text("#!/bin/sh\nsleep 300 &\nsleep 300\n")
    script.chmod(0o755)
    running = processes.start("parent", [str(script)], logs=tmp_path)
    assert processes.alive(running)
    processes.stop(running, grace=5)
    assert processes.group_members(running.pid) == []
    assert not processes.alive(running)
    assert os.path.exists(tmp_path / "parent.log")
