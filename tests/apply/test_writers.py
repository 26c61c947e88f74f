"""One writer per cluster: two real `fleetctl apply` runs at once, on the sandbox."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet import kube
from fleet.engine import writers
from fleet.kube import leases
from fleet.sandbox import Sandbox
from fleetctl import cli
from tests import waits
from tests.apply.conftest import Engine
from tests.apply.repos import Repo
from tests.conftest import Kubectl

pytestmark = pytest.mark.sandbox

POOL_NODE = "a100x8-01"


def fleetctl(sandbox: Sandbox, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, KUBECONFIG=str(sandbox.kubeconfig), NO_COLOR="1")
    return subprocess.Popen(
        [sys.executable, "-m", "fleetctl", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def holder(kubectl: Kubectl, cluster: str) -> str:
    ref = writers.lease_ref(cluster)
    got = kubectl("get", "lease", ref.name, "-n", ref.namespace, "-o", "json", check=False)
    return str(json.loads(got.stdout)["spec"].get("holderIdentity") or "") if got.returncode == 0 else ""


@pytest.fixture()
def slow_writer(sandbox: Sandbox, repo: Repo, tmp_path: Path, kubectl: Kubectl) -> Iterator[subprocess.Popen[str]]:
    """`fleetctl apply` of a pool that can never be healthy (3 nodes wanted, 1 exists): it holds the
    cluster's Lease while its pools gate waits, then fails. Its node labels are released afterwards."""
    first = Repo(root=tmp_path / "first", id=repo.id)
    label = f"t{repo.id}.example.com/p"
    first.pool(
        "a100",
        selector={"sandbox.fleet.gpufleet.dev/pool": "a100x8"},
        labels={label: "a"},
        nodes=3,
        product="NVIDIA A100-SXM4-80GB",
    )
    proc = fleetctl(sandbox, "apply", str(first.write()), "--cluster", repo.cluster, "--health-timeout", "25")
    try:
        waits.wait_for(
            lambda: holder(kubectl, repo.cluster).endswith(f":{proc.pid}"),
            what="the first apply holds the Lease",
            within=120,
        )
        waits.wait_for(
            lambda: label in kubectl("get", "node", POOL_NODE, "-o", "jsonpath={.metadata.labels}").stdout,
            what="the first apply waits in its pools gate",
            within=120,
        )
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        release = Repo(root=tmp_path / "release", id=repo.id)
        cli.run(["apply", str(release.write()), "--cluster", repo.cluster, "--prune", "--wait"])


def test_a_second_concurrent_apply_is_refused_and_writes_nothing_then_queues_with_wait(
    sandbox: Sandbox,
    fleet: Engine,
    repo: Repo,
    slow_writer: subprocess.Popen[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    second = str(repo.write())
    namespace = kube.Ref("v1", "Namespace", "", repo.ns("ml"))

    # Count what the refused run itself sends (it runs in this process): the API server's own
    # counters also see other tests' namespaces being emptied by the namespace controller.
    clients: list[kube.Client] = []
    connect = kube.connect

    async def recording(**kwargs: Any) -> kube.Client:
        clients.append(await connect(**kwargs))
        return clients[-1]

    monkeypatch.setattr(kube, "connect", recording)
    codes = [cli.run(["apply", second, "--cluster", repo.cluster])]
    monkeypatch.setattr(kube, "connect", connect)
    writes = sum(c.counts.writes for c in clients)
    err = capsys.readouterr().err
    assert codes == [2]
    assert f"cluster {repo.cluster}: another writer is applying to this cluster" in err
    assert f"Lease fleet-system/fleet-{repo.cluster} is held by " in err and f":{slow_writer.pid} since " in err
    assert "nothing was written" in err and "--wait" in err
    assert "Traceback" not in err
    assert writes == 0, "refused before any write"
    with pytest.raises(kube.NotFound):
        fleet.run(lambda c: c.get(namespace))

    assert cli.run(["apply", second, "--cluster", repo.cluster, "--dry-run"]) == 0, "a dry run takes no Lease"
    capsys.readouterr()

    assert cli.run(["apply", second, "--cluster", repo.cluster, "--wait"]) == 0
    err = capsys.readouterr().err
    assert f"waiting: Lease of cluster {repo.cluster} is held by " in err and f":{slow_writer.pid}" in err
    assert slow_writer.wait(timeout=60) == 1, "the first apply ended as it would have alone (its gate failed)"
    assert fleet.run(lambda c: c.get(namespace))["status"]["phase"] == "Active"


def test_sigterm_stops_an_apply_and_releases_its_lease(
    sandbox: Sandbox, repo: Repo, slow_writer: subprocess.Popen[str], kubectl: Kubectl
) -> None:
    slow_writer.send_signal(signal.SIGTERM)
    _, err = slow_writer.communicate(timeout=60)
    assert slow_writer.returncode == 143 and "terminated" in err
    assert holder(kubectl, repo.cluster) == "", "released, so the next writer need not wait for it to expire"


def test_lease_identity_names_user_host_and_process() -> None:
    user_host, _, pid = writers.identity().rpartition(":")
    assert "@" in user_host and pid == str(os.getpid())
    assert writers.lease_ref("gpu-east") == kube.Ref(leases.API_VERSION, "Lease", "fleet-system", "fleet-gpu-east")


def test_an_apply_that_loses_its_lease_stops_and_says_so(
    repo: Repo, slow_writer: subprocess.Popen[str], kubectl: Kubectl
) -> None:
    ref = writers.lease_ref(repo.cluster)
    lease = json.loads(kubectl("get", "lease", ref.name, "-n", ref.namespace, "-o", "json").stdout)
    lease["spec"]["holderIdentity"] = "intruder"
    kubectl("replace", "-f", "-", stdin=json.dumps(lease))  # carries the resourceVersion it read
    out, err = slow_writer.communicate(timeout=60)
    assert slow_writer.returncode == 1
    assert f"Lease {ref.namespace}/{ref.name} was taken over by intruder" in out
    assert "pools" in out, "what was done before is reported"
    assert "Traceback" not in err
    lease = json.loads(kubectl("get", "lease", ref.name, "-n", ref.namespace, "-o", "json").stdout)
    assert lease["spec"]["holderIdentity"] == "intruder", "the loser does not release what is no longer its"
    del lease["spec"]["holderIdentity"]
    kubectl("replace", "-f", "-", stdin=json.dumps(lease))
