"""An API server that stops answering in the middle of a stage: the rest of the stage is not sent.

Found by the controller's restart fault (tests/faults/test_control_plane.py): with kube-apiserver
down, every object of a 300-template stage spent the client's whole retry budget, 425 requests
in 10 s. Here the team is applied first; then a ``Sync`` plans 60 templates against the real
sandbox, and from its first server-side apply on, the connection is cut (the client's own httpx
session refuses every apply request as a lost connection would; the ledger's writes before the
stage still reach the server). At most one object per concurrent slot is tried (each with the
client's retries), every other template is skipped as "not sent", and the run stops unfinished,
so its caller retries it with its own backoff.
"""

from __future__ import annotations

import httpx
import pytest

from fleet import engine, kube
from fleet.engine.changesets import Action
from fleet.kube.clients import APPLY_PATCH
from tests.apply.conftest import Engine
from tests.apply.repos import Repo

pytestmark = [pytest.mark.sandbox]

TEMPLATES = 60
CONCURRENCY = 4
ATTEMPTS = 2


def test_an_unreachable_server_stops_the_stage_after_the_objects_in_flight(fleet: Engine, repo: Repo) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=None)
    assert not fleet.apply().failed
    for i in range(TEMPLATES):
        repo.claim_template("ml", f"t-{i:03d}")
    plan = fleet.plan()

    async def body(client: kube.Client) -> engine.ChangeSet:
        sync = engine.Sync(
            client=client, plan=plan, options=engine.Options(health_timeout=30.0, concurrency=CONCURRENCY)
        )

        async def cut(request: httpx.Request) -> None:
            if request.headers.get("content-type") == APPLY_PATCH:
                raise httpx.ConnectError("connection refused (injected)", request=request)

        session = await client._session()
        before: list[int] = []

        def cut_after_start(step: str) -> None:  # the ledger and the live objects were read
            if not before:
                session.event_hooks["request"].append(cut)
                client.retry = kube.RetryPolicy(attempts=ATTEMPTS, base=0.01, cap=0.02)
                before.append(client.counts.by_verb["apply"])

        outcome = await engine.drive(sync, hooks=engine.Hooks(before_step=cut_after_start))
        sent = client.counts.by_verb["apply"] - before[0]
        assert sent <= CONCURRENCY * ATTEMPTS
        assert client.counts.failed[0] == sent, "every apply sent was a failed attempt without an answer"
        assert isinstance(outcome.unavailable, kube.Unreachable), "the caller is told the server is unavailable"
        return outcome.changes

    changes = fleet.run(body)
    ours = [c for c in changes.entries if c.ref.kind == "ResourceClaimTemplate"]
    failed = [c for c in ours if c.failed]
    skipped = [c for c in ours if c.action == Action.SKIPPED]
    assert len(ours) == TEMPLATES
    assert 1 <= len(failed) <= CONCURRENCY
    assert all("connection refused (injected)" in c.error for c in failed)
    assert len(skipped) == TEMPLATES - len(failed)
    assert all(c.reason.startswith("not sent: the API server is unavailable") for c in skipped)
    assert not changes.changed
