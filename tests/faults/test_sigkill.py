"""``fleetctl apply`` SIGKILLed at random points of a rollout, restarted each time, loses nothing.

Until the controller can be killed the same way, the writer it shares with the CLI is.
Revision A (240 templates) is applied. Revision B changes 180 of them, drops 60 and
adds 60. ``fleetctl apply --prune --wait`` for B is SIGKILLed at a random point of the
rollout (once a random number of templates carry B's content; ``--concurrency 2`` so
that a rollout lasts long enough to be hit anywhere), several times; each
restart waits out the dead writer's Lease (``--wait``). A last run completes. Then,
object by object: every template of B exists with B's content, none of A's dropped
ones is left, none of B's was pruned; the ledger's progress after each kill shows where
the next run resumed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet.sandbox import Sandbox, credentials
from tests.apply.conftest import Engine
from tests.apply.repos import Repo
from tests.conftest import Kubectl

KILLS = 5
CHANGED = 240  # templates B writes: 180 changed, 60 added
SEED = int(os.environ.get("FLEET_FAULT_SEED", "11"))


def _templates(repo: Repo, *, names: range, count: int) -> None:
    repo.claims = {}
    for i in names:
        repo.claim_template("ml", f"t-{i:03d}", count=count)


def _apply(repo: Path, *, cluster: str, sandbox: Sandbox) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fleetctl",
            "apply",
            str(repo),
            "--cluster",
            cluster,
            "--prune",
            "--wait",
            "--kubeconfig",
            str(sandbox.kubeconfig),
            "--context",
            credentials.CLUSTER,
            "--concurrency",
            "2",
            "--health-timeout",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_for_writes(sandbox: Sandbox, *, namespace: str, count: int, run: subprocess.Popen[str]) -> None:
    """Return once ``count`` templates were written with B's content (a watch), or the run ended."""
    watch = subprocess.Popen(
        [
            str(sandbox.binary("kubectl")),
            "--kubeconfig",
            str(sandbox.kubeconfig),
            "get",
            "resourceclaimtemplates",
            "-n",
            namespace,
            "--watch-only",
            "-o",
            "jsonpath={.spec.spec.devices.requests[0].exactly.count}{'\\n'}",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        seen = 0
        for line in watch.stdout:
            seen += line.strip() == "2"
            if seen >= count or run.poll() is not None:
                return
    finally:
        watch.kill()
        watch.wait()


def _written(kubectl: Kubectl, namespace: str) -> int:
    """Templates in ``namespace`` that already carry revision B's content (count 2)."""
    result = kubectl(
        "get",
        "resourceclaimtemplates",
        "-n",
        namespace,
        "-o",
        "jsonpath={.items[*].spec.spec.devices.requests[0].exactly.count}",
    )
    return result.stdout.split().count("2")


def _progress(kubectl: Kubectl, cluster: str) -> dict[str, object]:
    result = kubectl(
        "get",
        "configmap",
        f"fleet-ledger-{cluster}",
        "-n",
        "fleet-system",
        "-o",
        "jsonpath={.data.progress}",
        check=False,
    )
    return json.loads(result.stdout or "{}") if result.returncode == 0 else {}


@pytest.mark.slow
def test_sigkill_at_random_points_then_live_equals_desired(
    fleet: Engine, repo: Repo, sandbox: Sandbox, kubectl: Kubectl
) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=None)
    _templates(repo, names=range(240), count=1)
    fleet.apply(prune=True)
    _templates(repo, names=range(60, 300), count=2)  # drop t-000..059, change 060..239, add 240..299
    path = repo.write()
    rng = random.Random(SEED)
    resumed: list[dict[str, object]] = []
    for _ in range(KILLS):
        run = _apply(path, cluster=repo.cluster, sandbox=sandbox)
        # a random point of what is left of the rollout: after that many more writes of B's content,
        # seen through a watch; when (almost) all are written, a random moment of the rest (prune, ledger)
        before = _written(kubectl, repo.ns("ml"))
        if CHANGED - before > 5:
            _wait_for_writes(sandbox, namespace=repo.ns("ml"), count=rng.randrange(1, CHANGED - before), run=run)
        else:
            time.sleep(rng.uniform(0.5, 4.0))
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        resumed.append({"killed_at": _written(kubectl, repo.ns("ml")), **_progress(kubectl, repo.cluster)})
    final = _apply(path, cluster=repo.cluster, sandbox=sandbox)
    out, _ = final.communicate(timeout=300)
    print("ledger progress after each kill:", *resumed, sep="\n  ")
    assert final.returncode == 0, out
    live = json.loads(kubectl("get", "resourceclaimtemplates", "-n", repo.ns("ml"), "-o", "json").stdout)["items"]
    counts = {t["metadata"]["name"]: t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] for t in live}
    desired = {f"t-{i:03d}": 2 for i in range(60, 300)}
    assert sum(not p.get("complete") for p in resumed) >= KILLS - 1, "the kills missed the rollout"
    assert sorted(set(desired) - set(counts)) == [], "missing after the kills"
    assert sorted(set(counts) - set(desired)) == [], "left over from revision A (not pruned)"
    assert {n: c for n, c in counts.items() if c != 2} == {}, "another revision's content"
    assert not fleet.diff().changed
