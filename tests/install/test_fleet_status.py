"""``fleetctl status --all``: one table for the example fleet's two clusters, each its own sandbox.

The example's gpu-east and gpu-west run as two sandboxes (separate state directories,
each with the nodes its Cluster expects), reached through one merged kubeconfig whose
contexts are named as the Clusters' ``spec.context`` say. A real ``fleet-controller``
process per cluster applies the example (its GPU Operator from the loopback chart
repository, kept Ready by the played operator) and writes its FleetSync.

gpu-east becomes Ready first. The command exits 1 while gpu-west has no controller
(``NoFleetSync``). gpu-west's controller then starts while one of its GPUs carries an XID
taint (``fleetctl sandbox taint-device``, as the driver's health checks publish one), so its
pool's gate fails (``ReconcileFailed``, naming the taint): the table shows that and exits 1.
Once the taint is gone, both clusters are Ready and the command exits 0. A cluster whose API
server cannot be reached is a row saying so (exit 1), never an error.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fleet.sandbox import Sandbox, binaries, charts, clusters, credentials, profiles
from fleet.sandbox.operators import StandInOperator
from fleet.sandbox.processes import free_port
from fleetctl.commands.demo import sandbox_overlay
from tests import processes, waits
from tests.controller.conftest import Remote, git
from tests.operator.conftest import UPSTREAM
from tests.waits import established

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "overlays" / "base" / "fleetsync-crd.yaml"


@pytest.fixture(scope="module")
def gpu_west(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A second sandbox, with the nodes the example's gpu-west cluster expects."""
    directory = tmp_path_factory.mktemp("gpu-west")
    sb = clusters.up(directory=directory, profile=profiles.load(ROOT / "examples" / "sandbox" / "gpu-west.yaml"))
    try:
        yield sb
    finally:
        clusters.down(directory=directory)


def merged_kubeconfig(path: Path, sandboxes: dict[str, Sandbox], *, dead: str = "") -> Path:
    """One kubeconfig with a context per sandbox, named after its cluster; ``dead``'s server is a closed port."""
    merged: dict[str, object] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for name, sb in sandboxes.items():
        config = yaml.safe_load(sb.kubeconfig.read_text())
        [cluster] = [c for c in config["clusters"] if c["name"] == credentials.CLUSTER]
        [user] = [u for u in config["users"] if u["name"] == "admin"]
        server = dict(cluster["cluster"])
        if name == dead:
            server["server"] = f"https://127.0.0.1:{free_port()}"
        merged["clusters"].append({"name": name, "cluster": server})  # type: ignore[attr-defined]
        merged["users"].append({"name": f"admin-{name}", "user": user["user"]})  # type: ignore[attr-defined]
        merged["contexts"].append({"name": name, "context": {"cluster": name, "user": f"admin-{name}"}})  # type: ignore[attr-defined]
    merged["current-context"] = next(iter(sandboxes))
    path.write_text(yaml.safe_dump(merged))
    return path


@contextlib.contextmanager
def controller(
    sb: Sandbox, *, cluster: str, remote: Remote, helm: Path, root: Path, health_timeout: str = "2m"
) -> Iterator[Path]:
    """``python -m fleet.controller`` for ``cluster`` against ``sb``; yields its log; SIGTERM at the end."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "KUBECONFIG", "KUBERNETES_", "OTEL_"))}
    argv = [
        sys.executable, "-m", "fleet.controller", "--repo", remote.url, "--ref", "main", "--cluster", cluster,
        "--kubeconfig", str(sb.kubeconfig), "--context", credentials.CLUSTER, "--no-leader-elect",
        "--listen", "127.0.0.1:0", "--interval", "2s", "--helm", str(helm), "--state-dir", str(root / cluster),
        "--health-timeout", health_timeout,
    ]  # fmt: skip
    log = root / f"{cluster}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        yield log
    finally:
        processes.stop(proc)


def ready_of(sb: Sandbox, cluster: str) -> tuple[str, str, str]:
    """(Ready status, its reason, lastAppliedRevision) of ``cluster``'s FleetSync; empty strings if none."""
    got = sb.kubectl("get", "fleetsync", cluster, "-o", "json", check=False)
    if got.returncode != 0:
        return ("", "", "")
    status = json.loads(got.stdout).get("status") or {}
    ready = [c for c in status.get("conditions") or () if c["type"] == "Ready"] or [{}]
    return (ready[0].get("status", ""), ready[0].get("reason", ""), status.get("lastAppliedRevision", ""))


def taint(sb: Sandbox, node: str, device: str, spec: str) -> int:
    """``fleetctl sandbox taint-device`` on ``sb``: plays (or clears) a GPU's XID error."""
    argv = [sys.executable, "-m", "fleetctl", "sandbox", "--dir", str(sb.directory), "taint-device", node, device, spec]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, cwd=ROOT).returncode


def status_all(checkout: Path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetctl", "status", "--all", str(checkout), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"NO_COLOR": "1"},
    )  # fmt: skip


def test_one_table_for_the_fleet(gpu_east: Sandbox, gpu_west: Sandbox, tmp_path: Path) -> None:
    found = binaries.locate()
    assert found is not None, "the sandbox binaries are not built: run fleetctl sandbox build"
    sandboxes = {"gpu-east": gpu_east, "gpu-west": gpu_west}
    for sb in sandboxes.values():
        sb.kubectl("apply", "--server-side", "-f", str(CRD))
        established(sb.kubectl, "fleetsyncs.fleet.gpufleet.dev")
    kubeconfig = merged_kubeconfig(tmp_path / "kubeconfig", sandboxes)
    remote = Remote(tmp_path / "git")
    with (
        charts.serve(tmp_path / "charts", helm=found["helm"], upstream=UPSTREAM) as chart_repository,
        StandInOperator(gpu_east, upstream=UPSTREAM),
        StandInOperator(gpu_west, upstream=UPSTREAM),
    ):
        shutil.copytree(ROOT / "examples" / "fleet", remote.work, dirs_exist_ok=True)
        for cluster in sandboxes:
            overlay = sandbox_overlay(cluster=cluster, chart_repository=chart_repository)
            name = f"zz-sandbox-{cluster}"
            (remote.work / "overlays" / name).mkdir(parents=True)
            (remote.work / "overlays" / name / "overlay.yaml").write_text(overlay.replace('"zz-sandbox"', f'"{name}"'))
        git(remote.work, "add", "-A")
        git(remote.work, "commit", "-q", "-m", "the example fleet")
        git(remote.work, "push", "-q", "origin", "main")
        revision = git(remote.work, "rev-parse", "HEAD")
        checkout = remote.work

        with controller(gpu_east, cluster="gpu-east", remote=remote, helm=found["helm"], root=tmp_path) as east_log:
            applied = ("True", "Applied", revision)
            waits.wait_for(
                lambda: ready_of(gpu_east, "gpu-east") == applied,
                within=300,
                what="gpu-east Ready",
                details=lambda: east_log.read_text()[-2000:],
            )

            one = status_all(checkout, kubeconfig)
            assert one.returncode == 1, one.stdout + one.stderr
            lines = one.stdout.splitlines()
            header = "CLUSTER CONTEXT WAVE REVISION READY REASON DRIFT CONFLICTS FROZEN WAITING OPERATOR STUCK"
            assert lines[0].split() == header.split()
            east = lines[1].split()
            assert east[:6] == ["gpu-east", "gpu-east", "-", revision[:12], "True", "Applied"], one.stdout
            assert east[6:8] == ["0", "0"] and east[-1] == "0" and east[-2].startswith("v"), one.stdout
            assert lines[2].split()[:6] == ["gpu-west", "gpu-west", "-", "-", "Unknown", "NoFleetSync"], one.stdout
            assert "gpu-west: no FleetSync gpu-west in context gpu-west" in one.stdout

            # One of gpu-west's GPUs has an XID error when its controller starts: the pool's gate fails.
            xid = ("h100x8-01", "gpu-3")
            assert taint(gpu_west, *xid, "gpu.nvidia.com/xid=79:NoSchedule") == 0
            west = controller(
                gpu_west, cluster="gpu-west", remote=remote, helm=found["helm"], root=tmp_path, health_timeout="5s"
            )
            with west as west_log:
                waits.wait_for(
                    lambda: ready_of(gpu_west, "gpu-west")[:2] == ("False", "ReconcileFailed"),
                    within=300,
                    what="gpu-west's reconcile failed",
                    details=lambda: west_log.read_text()[-2000:],
                )
                both = status_all(checkout, kubeconfig, "-o", "json")
                assert both.returncode == 1, both.stdout + both.stderr
                rows = {r["cluster"]: r for r in json.loads(both.stdout)}
                assert list(rows) == ["gpu-east", "gpu-west"]
                assert (rows["gpu-east"]["ready"], rows["gpu-east"]["revision"]) == ("True", revision)
                assert rows["gpu-east"]["operatorVersion"] and rows["gpu-east"]["stuckNodes"] == 0
                assert (rows["gpu-west"]["ready"], rows["gpu-west"]["reason"]) == ("False", "ReconcileFailed")
                assert "gpu.nvidia.com/xid=79:NoSchedule" in rows["gpu-west"]["message"], rows["gpu-west"]
                assert all(r["reachable"] and r["drift"] == 0 and r["conflicts"] == 0 for r in rows.values())

                text = status_all(checkout, kubeconfig)
                assert text.returncode == 1
                assert text.stdout.splitlines()[2].split()[4:6] == ["False", "ReconcileFailed"], text.stdout
                assert "gpu-west: cluster gpu-west: stage " in text.stdout and "not healthy" in text.stdout, text.stdout

                # The GPU is healthy again: the controller converges and the whole fleet is Ready.
                assert taint(gpu_west, *xid, "gpu.nvidia.com/xid-") == 0
                waits.wait_for(
                    lambda: ready_of(gpu_west, "gpu-west") == ("True", "Applied", revision),
                    within=300,
                    what="gpu-west Ready",
                    details=lambda: west_log.read_text()[-2000:],
                )
                ok = status_all(checkout, kubeconfig)
                assert ok.returncode == 0, ok.stdout + ok.stderr + east_log.read_text()[-2000:]
                assert [line.split()[4:6] for line in ok.stdout.splitlines()[1:3]] == [["True", "Applied"]] * 2
                assert len(ok.stdout.splitlines()) == 3, ok.stdout

            # gpu-west's API server cannot be reached: a row saying so, the other cluster still shown.
            dead = merged_kubeconfig(tmp_path / "dead-west", sandboxes, dead="gpu-west")
            down = status_all(checkout, dead, "--timeout", "3")
            assert down.returncode == 1, down.stdout + down.stderr
            assert down.stderr == "", down.stderr
            rows_down = {line.split()[0]: line.split() for line in down.stdout.splitlines()[1:3]}
            assert rows_down["gpu-east"][4:6] == ["True", "Applied"]
            assert rows_down["gpu-west"][3:6] == ["-", "Unknown", "Unreachable"]
            assert "gpu-west: " in down.stdout and "API server" in down.stdout
