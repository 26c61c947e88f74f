"""``fleetctl apply`` SIGKILLed at random points of a rollout, restarted each time, loses nothing.

Until the controller can be killed the same way, the writer it shares with the CLI is:
revision A (templates ``t-000``...) is applied, then revision B changes half of them,
drops some and adds others, and ``fleetctl apply --prune --wait`` for B is SIGKILLed
after a random delay, several times, each restart waiting out the dead writer's Lease
(``--wait``). A last run completes. Then, object by object: every template of B exists
with B's content, none of A's dropped ones is left, none of B's was pruned, and the
ledger's progress recorded after each kill shows where the next run resumed.
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
            "--health-timeout",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


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
    _templates(repo, names=range(120), count=1)
    fleet.apply(prune=True)
    _templates(repo, names=range(30, 150), count=2)  # drop t-000..029, change 030..119, add 120..149
    path = repo.write()
    rng = random.Random(SEED)
    resumed: list[dict[str, object]] = []
    for _ in range(KILLS):
        run = _apply(path, cluster=repo.cluster, sandbox=sandbox)
        time.sleep(rng.uniform(1.0, 6.0))
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        resumed.append(_progress(kubectl, repo.cluster))
    final = _apply(path, cluster=repo.cluster, sandbox=sandbox)
    out, _ = final.communicate(timeout=300)
    print("ledger progress after each kill:", *resumed, sep="\n  ")
    assert final.returncode == 0, out
    live = json.loads(kubectl("get", "resourceclaimtemplates", "-n", repo.ns("ml"), "-o", "json").stdout)["items"]
    counts = {t["metadata"]["name"]: t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] for t in live}
    desired = {f"t-{i:03d}": 2 for i in range(30, 150)}
    assert sorted(set(desired) - set(counts)) == [], "missing after the kills"
    assert sorted(set(counts) - set(desired)) == [], "left over from revision A (not pruned)"
    assert {n: c for n, c in counts.items() if c != 2} == {}, "another revision's content"
    assert not fleet.diff().changed
