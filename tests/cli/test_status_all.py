"""``fleetctl status --all`` without a cluster: rows from FleetSync objects, contexts, exits (the
two-sandbox run is ``tests/install/test_fleet_status.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.views import fleetsyncs
from fleetctl.commands import status

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "fleet"


def fleetsync(**extra: object) -> dict[str, object]:
    body: dict[str, object] = {
        "lastAppliedRevision": "16b655d512f26c05f18e359d8aeedb1074c1dfdf",
        "driftCount": 2,
        "conflictCount": 1,
        "operator": {"version": "v25.10.1", "stuckCount": 1},
        "conditions": [{"type": "Ready", "status": "False", "reason": "Conflict", "message": "1 field(s) owned..."}],
    }
    body.update(extra)
    return {"metadata": {"name": "gpu-east"}, "status": body}


def test_a_row_is_a_view_of_the_fleetsync() -> None:
    row = fleetsyncs.row_of("gpu-east", "prod-east", fleetsync())
    assert row == fleetsyncs.Row(
        cluster="gpu-east",
        context="prod-east",
        revision="16b655d512f26c05f18e359d8aeedb1074c1dfdf",
        ready="False",
        reason="Conflict",
        message="1 field(s) owned...",
        drift=2,
        conflicts=1,
        frozen=None,
        operator_version="v25.10.1",
        stuck_nodes=1,
    )
    assert fleetsyncs.row_of("c", "x", fleetsync(frozenCount=3)).frozen == 3
    assert fleetsyncs.row_of("c", "x", fleetsync(frozen=[{"kind": "DeviceClass"}])).frozen == 1
    missing = fleetsyncs.row_of("c", "x", None)
    assert (missing.ready, missing.reason) == ("Unknown", "NoFleetSync") and "no FleetSync c" in missing.error
    assert fleetsyncs.row_of("c", "x", {"metadata": {}}).reason == "NoStatus"
    assert fleetsyncs.row_of("c", "x", fleetsync()).document()["operatorVersion"] == "v25.10.1"


def test_the_table_says_why_each_cluster_is_not_ready() -> None:
    rows = [
        fleetsyncs.row_of("gpu-east", "gpu-east", fleetsync(frozenCount=0)),
        fleetsyncs.Row("gpu-west", "gpu-west", False, "cannot reach the API server", reason="Unreachable"),
    ]
    lines = status.table(rows).splitlines()
    assert lines[0].split()[:6] == ["CLUSTER", "CONTEXT", "WAVE", "REVISION", "READY", "REASON"]
    assert lines[1].split() == [
        "gpu-east",
        "gpu-east",
        "-",
        "16b655d512f2",
        "False",
        "Conflict",
        "2",
        "1",
        "0",
        "0",
        "v25.10.1",
        "1",
    ]
    assert lines[2].split() == [
        "gpu-west", "gpu-west", "-", "-", "Unknown", "Unreachable", "-", "-", "-", "-", "-", "-"
    ]  # fmt: skip
    assert lines[4:] == ["gpu-east: 1 field(s) owned...", "gpu-west: cannot reach the API server"]


def test_the_table_says_what_each_cluster_holds_back_and_for_what() -> None:
    held = [
        {
            "kind": "DeviceClass",
            "name": "gpu.nvidia.com",
            "reason": "the maintenance window (opens 2026-12-12 02:00 CET)",
        }
    ]
    row = fleetsyncs.row_of("gpu-east", "gpu-east", fleetsync(waitingCount=2, waiting=held))
    assert (row.waiting, row.waits_for) == (2, held[0]["reason"])
    assert row.document()["waitsFor"] == held[0]["reason"]
    lines = status.table([row]).splitlines()
    assert lines[0].split()[9] == "WAITING" and lines[1].split()[9] == "2"
    assert lines[-1] == (
        "gpu-east: 2 disruptive change(s) wait for the maintenance window (opens 2026-12-12 02:00 CET)"
    )


def test_the_table_shows_each_clusters_wave_and_what_it_waits_for() -> None:
    gate = "wave 1 (gpu-west): gpu-west has not reported success for 16b655d512f2"
    held = [{"kind": "DeviceClass", "name": "gpu.nvidia.com", "reason": gate}]
    rollout = {"wave": 2, "after": ["gpu-west"], "bake": "3600s", "waitsFor": gate, "held": 1}
    east = fleetsyncs.row_of("gpu-east", "gpu-east", fleetsync(rollout=rollout, waitingCount=1, waiting=held))
    west = fleetsyncs.row_of("gpu-west", "gpu-west", fleetsync(rollout={"wave": 1, "after": [], "waitsFor": ""}))
    baking = fleetsyncs.row_of("gpu-north", "gpu-north", fleetsync(rollout={**rollout, "waitsFor": "wave 1 baking"}))
    assert (east.wave, east.wave_waits_for) == (2, gate) and east.document()["waveWaitsFor"] == gate
    lines = status.table([west, east, baking]).splitlines()
    assert lines[0].split()[2] == "WAVE"
    assert [line.split()[2] for line in lines[1:4]] == ["1", "2", "2"]
    assert f"gpu-east: 1 disruptive change(s) wait for {gate}" in lines
    assert "gpu-north: wave 2 waits for wave 1 baking" in lines
    assert not any(line.startswith("gpu-east: wave") for line in lines), "said once"
    text = status.render({"metadata": {"name": "gpu-east"}, "status": {"rollout": rollout}})
    assert "wave       2 (after gpu-west; bake 3600s)" in text
    assert f"  waits for {gate} (1 disruptive change(s) held)" in text


def test_contexts_come_from_the_clusters_then_their_names_then_overrides(tmp_path: Path) -> None:
    assert status.contexts_for(EXAMPLE, overrides=[]) == [("gpu-east", "gpu-east"), ("gpu-west", "gpu-west")]
    assert status.contexts_for(EXAMPLE, overrides=["gpu-west=prod-west"])[1] == ("gpu-west", "prod-west")
    with pytest.raises(FleetError, match="does not list"):
        status.contexts_for(EXAMPLE, overrides=["gpu-north=x"])
    with pytest.raises(FleetError, match="not CLUSTER=CTX"):
        status.contexts_for(EXAMPLE, overrides=["gpu-west"])
    repo = tmp_path / "repo"
    (repo / "clusters").mkdir(parents=True)
    (repo / "fleet.yaml").write_text(
        "apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Fleet\nmetadata: {name: f}\nspec: {clusters: [a, b]}\n"
    )
    (repo / "clusters" / "a.yaml").write_text(
        "apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Cluster\nmetadata: {name: a}\n"
        'spec: {kubernetesVersion: "1.36", context: admin@a}\n'
    )
    assert status.contexts_for(repo, overrides=[]) == [("a", "admin@a"), ("b", "b")]
    (repo / "fleet.yaml").write_text("kind: Fleet\n")
    with pytest.raises(FleetError, match="lists no clusters"):
        status.contexts_for(repo, overrides=[])


def fleetctl(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "fleetctl", "status", *args, "--kubeconfig", str(kubeconfig)],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT, env=env,
    )  # fmt: skip


def test_clusters_that_cannot_be_reached_are_rows_not_errors(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:9'}\n"
        "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: gpu-east\n  context: {cluster: c, user: u}\n"
        "current-context: gpu-east\n"
    )
    shown = fleetctl("--all", str(EXAMPLE), "--timeout", "2", kubeconfig=kubeconfig)
    assert shown.returncode == 1 and shown.stderr == "", shown.stderr
    assert [line.split()[:6] for line in shown.stdout.splitlines()[1:3]] == [
        ["gpu-east", "gpu-east", "-", "-", "Unknown", "Unreachable"],
        ["gpu-west", "gpu-west", "-", "-", "Unknown", "Unreachable"],
    ]
    assert "gpu-west: context gpu-west: cannot use the kubeconfig" in shown.stdout
    usage = fleetctl("--all", str(EXAMPLE), "--cluster", "gpu-east", kubeconfig=kubeconfig)
    assert usage.returncode == 2 and "--all reads every cluster through its own context" in usage.stderr
    missing = fleetctl("--all", str(tmp_path / "nowhere"), kubeconfig=kubeconfig)
    assert missing.returncode == 2 and "is not a directory" in missing.stderr


def test_the_table_says_where_each_gpu_maintenance_stands() -> None:
    repair = {
        "name": "repair",
        "phase": "Out of scheduling",
        "where": "every device of node h100x8-02",
        "podCount": 1,
        "waiting": {"on": "claims", "reason": "1 allocated claim on node h100x8-02 (ml/held)"},
    }
    rows = [fleetsyncs.row_of("gpu-east", "gpu-east", fleetsync(maintenances=[repair]))]
    assert status.table(rows).splitlines()[-1] == (
        "gpu-east: GPUMaintenance repair Out of scheduling: every device of node h100x8-02, 1 pod(s) waited on, "
        "waits for 1 allocated claim on node h100x8-02 (ml/held)"
    )
