"""``fleetctl apply --prune`` refuses every hostile pull request before it writes anything.

For each PR, apply against the sandbox fails (exit 2, "the revision does not validate; nothing
was done") for a cluster the PR breaks and names the rule. Nothing was written, by the API
server's own count: its request counters (``apiserver_request_total``, read with
``tests/servermetrics.py``) show no write to any resource fleet manages, Namespace
``fleet-system`` included, and the cluster's writer Lease (``fleet.engine.writers``) is as it
was. Apply validates before it takes the Lease, so a refused revision leaves nothing behind,
not even fleet's own Lease. The controller runs the same pipeline (checkout → validate → plan,
``fleet.engine.pipelines``); ``test_controller`` holds it to the same refusals.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from fleet import kube
from fleet.engine import stages, writers
from fleet.sandbox import Sandbox, credentials
from fleetctl import cli
from tests import servermetrics as metrics
from tests.conftest import Kubectl
from tests.hostile_prs.corpus import PullRequest, pull_requests

# Three PRs (selector-matches-nothing, misspelt-attribute, cel-runtime-error) are refused only by
# the declared-pool check, which apply runs as validate does (``fleet.engine.pipelines.check_and_plan``).
PRS = [pytest.param(pr, id=pr.name) for pr in pull_requests()]


@pytest.fixture(scope="module", autouse=True)
def quiet_cluster(sandbox: Sandbox) -> None:
    """The counters are cluster-wide: wait until nobody writes fleet's resources for 2 s.

    A fresh sandbox's controllers (root CA ConfigMaps, quotas) and namespaces being emptied
    by earlier tests still write for a while.
    """
    deadline = time.monotonic() + 180
    before = metrics.request_totals(_counters(sandbox))
    while time.monotonic() < deadline:
        time.sleep(2)
        after = metrics.request_totals(_counters(sandbox))
        if not metrics.writes(before, after, resources=stages.WRITTEN_RESOURCES):
            return
        before = after


def _counters(sandbox: Sandbox) -> str:
    async def read() -> str:
        client = await kube.connect(kubeconfig=str(sandbox.kubeconfig), context=credentials.CLUSTER)
        try:
            return await client.metrics()
        finally:
            await client.close()

    return anyio.run(read)


def _lease_version(kubectl: Kubectl, cluster: str) -> str:
    """The resourceVersion of the cluster's writer Lease; "" while there is none."""
    ref = writers.lease_ref(cluster)
    got = kubectl(
        "get", "lease", ref.name, "-n", ref.namespace, "-o", "jsonpath={.metadata.resourceVersion}", check=False
    )
    return got.stdout.strip() if got.returncode == 0 else ""


@pytest.mark.slow
@pytest.mark.parametrize("pr", PRS)
def test_apply_refuses_with_zero_writes(
    pr: PullRequest, sandbox: Sandbox, kubectl: Kubectl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = pr.checkout(into=tmp_path)
    cluster = "gpu-west" if any(e.file.startswith("overlays/gpu-west/") for e in pr.expected) else "gpu-east"
    lease = _lease_version(kubectl, cluster)
    before = _counters(sandbox)
    code = cli.run(
        [
            "apply",
            str(repo),
            "--cluster",
            cluster,
            "--prune",
            "--kubeconfig",
            str(sandbox.kubeconfig),
            "--context",
            credentials.CLUSTER,
        ]
    )
    after = _counters(sandbox)
    out = capsys.readouterr()
    assert code == 2, f"{pr.subject}: exit {code}\n{out.out}{out.err}"
    assert "nothing was done" in out.err
    assert any(e.rule in out.out + out.err for e in pr.expected), out.out + out.err
    assert "Traceback" not in out.out + out.err
    totals = metrics.request_totals(before), metrics.request_totals(after)
    writes = metrics.writes(*totals, resources=stages.WRITTEN_RESOURCES)
    which = {k: n - totals[0][k] for k, n in totals[1].items() if n != totals[0][k] and k[0] in metrics.WRITE_VERBS}
    assert writes == 0, f"{pr.subject}: {writes} write(s) reached the API server: {which}"
    assert _lease_version(kubectl, cluster) == lease, f"{pr.subject}: apply took the writer Lease of {cluster}"
