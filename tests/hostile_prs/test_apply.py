"""``fleetctl apply --prune`` refuses every hostile pull request with zero writes to the cluster.

The controller runs the same pipeline (checkout → validate → plan, ``fleet.engine.pipelines``)
before any write; until it can reconcile from a git repository in tests, this is the
cluster-side half of the corpus: for each PR, apply against the sandbox fails (exit 2,
"the revision does not validate; nothing was done") for a cluster the PR breaks, names
the rule, and the API server's own request counters (``apiserver_request_total``,
``fleet.kube.metrics``) show no write to any resource fleet manages while it ran.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from fleet import kube
from fleet.engine import stages
from fleet.sandbox import Sandbox, credentials
from fleetctl import cli
from tests import servermetrics as metrics
from tests.conftest import Kubectl
from tests.hostile_prs.corpus import PullRequest, pull_requests

# Found by this test: three PRs (selector-matches-nothing, misspelt-attribute, cel-runtime-error)
# were rejected only by validate's declared-pool check, which apply skipped; the shared pipeline
# (``fleet.engine.pipelines.check_and_plan``) now runs it, so apply and the controller refuse them too.
PRS = [pytest.param(pr, id=pr.name) for pr in pull_requests()]


@pytest.fixture(scope="module", autouse=True)
def quiet_cluster(sandbox: Sandbox, kubectl: Kubectl) -> None:
    """The counters are cluster-wide: wait until nobody writes fleet's resources for 2 s.

    A fresh sandbox's controllers (root CA ConfigMaps, quotas) and namespaces being emptied
    by earlier tests still write for a while.
    """
    # Found by this test: apply takes the writer Lease before it validates, so against a cluster
    # fleet never wrote to, even a refused revision creates Namespace fleet-system and the Lease.
    # Measured here is the usual case, a cluster with a last good revision (fleet-system exists).
    if kubectl("get", "namespace", "fleet-system", check=False).returncode != 0:
        kubectl("create", "namespace", "fleet-system")
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


@pytest.mark.slow
@pytest.mark.parametrize("pr", PRS)
def test_apply_refuses_with_zero_writes(
    pr: PullRequest, sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = pr.checkout(into=tmp_path)
    cluster = "gpu-west" if any(e.file.startswith("overlays/gpu-west/") for e in pr.expected) else "gpu-east"
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
