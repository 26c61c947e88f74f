"""``fleetctl import`` refuses bad input with one message and a hint, exit 2, and writes nothing.

Through the CLI, as a user meets it: a context whose API server does not answer, a
directory that already holds a different fleet, and a cluster that does not serve the
DRA API (a control plane of this module's own, restarted with ``resource.k8s.io/v1`` off).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.engine import stages, writers
from fleet.sandbox import Sandbox, StartError, clusters, credentials, profiles
from fleetctl import cli
from tests import servermetrics as metrics
from tests.apply.conftest import Engine
from tests.apply.repos import Repo
from tests.waits import wait_for

pytestmark = pytest.mark.sandbox

CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: {name}
spec:
  selectors:
  - cel:
      expression: "device.attributes['gpu.nvidia.com'].productName == '{product}'"
"""


def _tree(root: Path) -> dict[str, str]:
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one error message of a refused import (exit 2, nothing on stdout, no traceback)."""
    assert cli.run(argv) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert "Traceback" not in out.err
    errors = [line for line in out.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.err
    assert "\n  hint: " in out.err
    return out.err


def test_a_context_that_cannot_be_reached(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
        "clusters: [{name: gone, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: gone, context: {cluster: gone, user: u}}]\n"
    )
    root = tmp_path / "fleet"
    argv = ["import", str(root), "--cluster", "c", "--kubeconfig", str(kubeconfig), "--context", "gone"]
    err = _refused([*argv, "--timeout", "5"], capsys)
    assert "cannot reach the API server" in err or "did not answer" in err
    assert "context gone" in err
    assert not root.exists()


def test_a_directory_that_holds_a_different_fleet(
    sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A class of its own in the cluster, made by hand, and the directory's different one of that name.
    name = f"t-{uuid.uuid4().hex[:6]}.gpu.example.com"
    sandbox.kubectl("create", "-f", "-", stdin=CLASS.format(name=name, product="NVIDIA H100 80GB HBM3"))
    root = tmp_path / "fleet"
    (root / "deviceclasses").mkdir(parents=True)
    (root / "fleet.yaml").write_text(
        "apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: other\nspec:\n  clusters: [east]\n"
    )
    (root / "deviceclasses" / f"{name}.yaml").write_text(CLASS.format(name=name, product="NVIDIA B200"))
    before = _tree(root)
    counter = Engine(sandbox, Repo(root=tmp_path / "unused"))
    counted = metrics.request_totals(counter.run(lambda c: c.metrics()))
    argv = ["import", str(root), "--cluster", "west", "--kubeconfig", str(sandbox.kubeconfig)]
    try:
        err = _refused([*argv, "--context", credentials.CLUSTER], capsys)
        after = metrics.request_totals(counter.run(lambda c: c.metrics()))
    finally:
        sandbox.kubectl("delete", "deviceclass", name, check=False)
    assert "holds a different fleet" in err and f"{name}.yaml" in err
    assert _tree(root) == before
    assert metrics.writes(counted, after, resources=set(stages.WRITTEN_RESOURCES)) == 0


@pytest.fixture(scope="module")
def without_dra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A control plane of its own whose kube-apiserver no longer serves resource.k8s.io/v1.

    Kubernetes 1.36 runs DRA in the API server itself (its gate is locked on), so with the API
    turned off ``/readyz`` never passes: the server answers requests, and discovery, all the same.
    """
    directory = tmp_path_factory.mktemp("no-dra")
    sb = clusters.up(directory=directory, profile=profiles.Profile(pools={"l4x4": 1}))
    try:
        sb.apiserver_flags.append("--runtime-config=resource.k8s.io/v1=false")
        clusters.stop_component(sb, "kube-apiserver")
        with pytest.raises(StartError, match="not ready"):
            clusters.start_component(sb, "kube-apiserver", timeout=5)
        wait_for(
            lambda: sb.kubectl("api-versions", check=False).returncode == 0,
            what="the API server answers discovery",
        )
        assert "resource.k8s.io/v1\n" not in sb.kubectl("api-versions").stdout
        yield sb
    finally:
        clusters.down(directory=directory)


def test_a_cluster_without_the_dra_api(
    without_dra: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "fleet"
    argv = ["import", str(root), "--cluster", "old", "--kubeconfig", str(without_dra.kubeconfig)]
    err = _refused([*argv, "--context", credentials.CLUSTER], capsys)
    assert "does not serve the DRA API resource.k8s.io/v1" in err
    assert "hint: fleet manages resource.k8s.io/v1" in err
    assert not root.exists()


def test_a_lease_held_by_another_writer_leaves_the_files_written_and_says_how_to_adopt(
    sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = "leased"
    ref = writers.lease_ref(cluster)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": ref.name, "namespace": ref.namespace},
        "spec": {"holderIdentity": "someone@elsewhere:1", "leaseDurationSeconds": 3600, "renewTime": now},
    }
    sandbox.kubectl("create", "namespace", ref.namespace, check=False)
    sandbox.kubectl("apply", "-f", "-", stdin=json.dumps(lease))
    try:
        root = tmp_path / "fleet"
        argv = ["import", str(root), "--cluster", cluster, "--kubeconfig", str(sandbox.kubeconfig)]
        assert cli.run([*argv, "--context", credentials.CLUSTER]) == 1
        err = capsys.readouterr().err
        assert f"error: cluster {cluster}: the repository is written, but fleet did not take the cluster over" in err
        assert "nothing was written" not in err
        assert "someone@elsewhere:1" in err and f"run `fleetctl apply {root} --cluster {cluster}`" in err
        assert (root / "fleet.yaml").exists() and (root / "IMPORT.md").exists()
    finally:
        sandbox.kubectl("delete", "lease", ref.name, "-n", ref.namespace, check=False)
