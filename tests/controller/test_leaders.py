"""Two ``fleet-controller`` processes (the real entry point) for one cluster: only the Lease holder
writes; SIGKILL of the leader mid-apply hands over within the Lease duration and the other
converges; SIGTERM releases the Lease on the way out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleet.sandbox import Sandbox, credentials
from tests import waits
from tests.apply.repos import Repo
from tests.controller.conftest import Remote
from tests.controller.replicas import Replicas, ready_at, replicas, templates

__all__ = ["replicas"]  # the fixture

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.usefixtures("fleetsync_crd")]


def test_sigkill_of_the_leader_mid_apply_hands_over_and_the_follower_converges(
    sandbox: Sandbox, remote: Remote, replicas: Replicas, tmp_path: Path
) -> None:
    repo = Repo(root=tmp_path / "unused", id=replicas.cluster.removeprefix("t-"))
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=None)
    ns = repo.ns("ml")
    first = remote.push(repo, message="a team")
    replicas.start("a")
    waits.wait_for(
        lambda: replicas.holder() == "a", within=60, what="a holds the Lease", details=lambda: replicas.log("a")
    )
    replicas.start("b")
    waits.wait_for(
        lambda: ready_at(sandbox, replicas.cluster, first), within=60, what="Ready", details=lambda: replicas.log("a")
    )
    assert replicas.holder() == "a"

    for i in range(150):
        repo.claim_template("ml", f"gpu-{i:03d}")
    second = remote.push(repo, message="ml: 150 claim templates")
    waits.wait_for(lambda: templates(sandbox, ns) > 0, within=60, what="the apply started")
    os.killpg(replicas.procs["a"].pid, signal.SIGKILL)
    killed = datetime.now(UTC)  # after the signal: a's last renewal came before this
    applied_when_killed = templates(sandbox, ns)

    waits.wait_for(
        lambda: replicas.holder() == "b", within=30, what="b takes the Lease", details=lambda: replicas.log("b")
    )
    takeover = (replicas.acquired() - killed).total_seconds()
    waits.wait_for(
        lambda: ready_at(sandbox, replicas.cluster, second),
        within=60,
        what="b converges",
        details=lambda: replicas.log("b"),
    )
    assert templates(sandbox, ns) == 150
    print(f"RESULT takeover_s={takeover:.2f} applied_before_kill={applied_when_killed}")
    # b watched every renewal of a's, so it takes over one Lease duration (15 s) after a's last
    # renewal, which came before the kill; 0.5 s is b's own event loop (it was loading the commit).
    assert takeover <= 15 + 0.5, f"took over {takeover:.2f}s after the kill (Lease 15 s)\n" + replicas.log("b")


def test_sigterm_releases_the_lease_and_exits_cleanly(
    sandbox: Sandbox, remote: Remote, replicas: Replicas, tmp_path: Path
) -> None:
    repo = Repo(root=tmp_path / "unused", id=replicas.cluster.removeprefix("t-"))
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    first = remote.push(repo, message="a team")
    proc = replicas.start("a")
    waits.wait_for(
        lambda: ready_at(sandbox, replicas.cluster, first), within=60, what="Ready", details=lambda: replicas.log("a")
    )
    # While the controller leads, `fleetctl apply` is refused before it writes, naming the holder.
    work = remote.work
    applied = subprocess.run(
        [sys.executable, "-m", "fleetctl", "apply", str(work), "--cluster", replicas.cluster,
         "--kubeconfig", str(sandbox.kubeconfig), "--context", credentials.CLUSTER],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert applied.returncode == 2, applied.stdout + applied.stderr
    assert f"Lease fleet-system/fleet-{replicas.cluster} is held by a" in applied.stderr, applied.stderr
    replicas.start("b")
    waits.wait_for(lambda: "following: Lease held by a" in replicas.log("b"), within=60, what="b follows")
    signalled = datetime.now(UTC)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, replicas.log("a")
    waits.wait_for(
        lambda: replicas.holder() == "b",
        within=10,
        what="b takes the released Lease",
        details=lambda: replicas.log("b"),
    )
    # Measured on the API server's record, not by this test's polling: SIGTERM → b's acquireTime.
    lease = json.loads(
        sandbox.kubectl("get", "lease", "-n", "fleet-system", f"fleet-{replicas.cluster}", "-o", "json").stdout
    )
    acquired = datetime.fromisoformat(lease["spec"]["acquireTime"].replace("Z", "+00:00"))
    handover = (acquired - signalled).total_seconds()
    print(f"RESULT sigterm_handover_s={handover:.2f}")
    assert handover < 5, f"b held the Lease {handover:.2f}s after a's SIGTERM\n" + replicas.log("a")
