"""Leader loss: the controller's Lease is stolen mid-apply; the old leader stops writing at once.

A real ``python -m fleet.controller`` (identity ``victim``, default Lease timings: 15 s
duration, 10 s renew deadline, 2 s retry) applies 800 templates. Mid-apply the test
rewrites the Lease as another identity (``thief``, with an hour's duration so that it
keeps it), as a second replica or a person would. The API server's audit log (the
sandbox records every write with its user agent; the controller sends
``fleet-controller/<identity>``) then says who wrote what and when: the victim wrote
before the steal, and no write of the victim's was received by the server later than
the renew deadline after the steal (it notices at its next renewal, at most a retry
period later, and cancels the writes in flight). It does not take the Lease back, keeps
running as a follower and says so in its log.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleet.sandbox import Sandbox, SandboxError
from tests import waits
from tests.apply.repos import Repo
from tests.conftest import Kubectl
from tests.controller.conftest import Remote
from tests.controller.replicas import Replicas, ready_at, templates

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.usefixtures("fleetsync_crd")]

RENEW_DEADLINE = 10.0  # the controller's default (--renew-deadline)
WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def _audit(sandbox: Sandbox) -> list[dict[str, Any]]:
    assert sandbox.audit_log.exists(), (
        f"no audit log at {sandbox.audit_log}: this sandbox was started before fleet.sandbox enabled "
        "auditing; restart it (fleetctl sandbox down, then up)"
    )
    events = []
    for line in sandbox.audit_log.read_text(errors="replace").splitlines():
        event = json.loads(line)
        if event.get("stage") == "ResponseComplete" and event.get("verb") in WRITES:
            events.append(event)
    return events


def _at(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(event["requestReceivedTimestamp"]).replace("Z", "+00:00"))


def _steal(kubectl: Kubectl, cluster: str) -> None:
    """Rewrite the Lease as ``thief`` (carrying the resourceVersion read: a 409 means try again)."""
    lease = json.loads(kubectl("get", "lease", "-n", "fleet-system", f"fleet-{cluster}", "-o", "json").stdout)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease["spec"].update(
        holderIdentity="thief",
        acquireTime=now,
        renewTime=now,
        leaseDurationSeconds=3600,
        leaseTransitions=int(lease["spec"].get("leaseTransitions") or 0) + 1,
    )
    kubectl("replace", "-f", "-", stdin=json.dumps(lease))


def test_a_stolen_lease_stops_the_old_leader_within_its_renew_deadline(
    sandbox: Sandbox, remote: Remote, replicas: Replicas, kubectl: Kubectl, tmp_path: Path
) -> None:
    repo = Repo(root=tmp_path / "unused", id=replicas.cluster.removeprefix("t-"))
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=None)
    ns = repo.ns("ml")
    first = remote.push(repo, message="a team")
    replicas.start("victim")
    waits.wait_for(
        lambda: ready_at(sandbox, replicas.cluster, first),
        within=120,
        what="Ready",
        details=lambda: replicas.log("victim"),
    )
    for i in range(800):
        repo.claim_template("ml", f"gpu-{i:03d}")
    remote.push(repo, message="ml: 800 claim templates")
    waits.wait_for(
        lambda: templates(sandbox, ns) >= 20,
        within=120,
        what="the apply started",
        details=lambda: replicas.log("victim"),
    )

    for attempt in range(5):
        try:
            _steal(kubectl, replicas.cluster)
            break
        except SandboxError:  # a renewal between the read and the replace (409): read again
            if attempt == 4:
                raise
    applied_at_steal = templates(sandbox, ns)
    waits.wait_for(
        lambda: "lost the Lease" in replicas.log("victim"), within=RENEW_DEADLINE + 5, what="the victim saw it"
    )
    time.sleep(RENEW_DEADLINE + 5)  # anything the victim would still send lands in the audit log by now

    events = _audit(sandbox)
    steal = max(
        _at(e)
        for e in events
        if e["verb"] == "update"
        and (e.get("objectRef") or {}).get("resource") == "leases"
        and (e.get("objectRef") or {}).get("name") == f"fleet-{replicas.cluster}"
        and not str(e.get("userAgent", "")).startswith("fleet-controller/")
        and e.get("responseStatus", {}).get("code") == 200
    )
    victim = [e for e in events if e.get("userAgent") == "fleet-controller/victim"]
    before = [e for e in victim if _at(e) <= steal]
    after = sorted((_at(e) - steal).total_seconds() for e in victim if _at(e) > steal)
    late = [e for e in victim if _at(e) > steal + timedelta(seconds=RENEW_DEADLINE)]
    applied = templates(sandbox, ns)
    print(
        f"RESULT applied_at_steal={applied_at_steal}/800 victim_writes_before={len(before)} "
        f"victim_writes_after={len(after)} last_after_s={after[-1] if after else 0:.2f} "
        f"writes_after_deadline={len(late)} templates_now={applied}"
    )
    assert len(before) >= 20, "the audit log does not attribute the victim's writes: is the User-Agent sent?"
    assert 0 < applied_at_steal < 800, f"the steal was not mid-apply ({applied_at_steal}/800 applied)"
    assert late == [], [(e["verb"], e["objectRef"], e["requestReceivedTimestamp"]) for e in late]
    assert applied < 800, "the victim finished the apply after losing its Lease"
    assert replicas.holder() == "thief", "the victim took the Lease back"
    assert replicas.procs["victim"].poll() is None, "the victim exited\n" + replicas.log("victim")
    assert "following: Lease held by thief" in replicas.log("victim"), replicas.log("victim")
