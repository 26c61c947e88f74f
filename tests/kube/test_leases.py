"""Leases on the real API server: one holder, expiry, races, renewal, loss, release and waiting."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from fleet import kube
from fleet.kube import leases
from fleet.sandbox import Sandbox, credentials
from tests.conftest import Kubectl

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio]

FAST = leases.Timings(duration=3.0, renew_deadline=2.0, retry_period=0.3)
GUARD = 60.0
"""Upper bound for a test that waits for the server, so a bug fails instead of hanging."""


@pytest.fixture(scope="module")
def namespace(kubectl: Kubectl) -> Iterator[str]:
    """One namespace for the module's Leases (each test has its own Lease), gone before the next module:
    its deletions must not reach a later test's server-side write counts."""
    name = f"t-leases-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl("delete", "namespace", name, "--wait=true", "--timeout=120s", check=False)


def lease(namespace: str) -> kube.Ref:
    return kube.Ref(leases.API_VERSION, "Lease", namespace, f"writer-{uuid.uuid4().hex[:6]}")


async def test_one_holder_at_a_time_and_release_hands_over(admin_client: kube.Client, namespace: str) -> None:
    ref = lease(namespace)
    first = await leases.try_acquire(client=admin_client, ref=ref, identity="a", timings=FAST)
    assert (first.holder, first.transitions, first.duration) == ("a", 0, 3)
    assert first.acquired is not None and first.renewed is not None
    with pytest.raises(leases.Held) as held:
        await leases.try_acquire(client=admin_client, ref=ref, identity="b", timings=FAST)
    assert held.value.record.holder == "a" and "held by a since" in str(held.value)

    again = await leases.try_acquire(client=admin_client, ref=ref, identity="a", timings=FAST)
    assert again.acquired == first.acquired and again.transitions == 0, "renewing is not a transition"

    await leases.release(client=admin_client, holding=leases.Holding(ref=ref, identity="a", record=again))
    assert (await leases.read(client=admin_client, ref=ref)).holder == ""  # type: ignore[union-attr]
    second = await leases.try_acquire(client=admin_client, ref=ref, identity="b", timings=FAST)
    assert (second.holder, second.transitions) == ("b", 1)


async def test_an_expired_lease_is_taken_over(admin_client: kube.Client, namespace: str) -> None:
    ref = lease(namespace)
    long_ago = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    await admin_client.create(
        {
            "apiVersion": leases.API_VERSION,
            "kind": "Lease",
            "metadata": {"name": ref.name, "namespace": namespace},
            "spec": {
                "holderIdentity": "crashed@laptop:1",
                "leaseDurationSeconds": 15,
                "acquireTime": long_ago,
                "renewTime": long_ago,
                "leaseTransitions": 4,
            },
        }
    )
    taken = await leases.try_acquire(client=admin_client, ref=ref, identity="me", timings=FAST)
    assert (taken.holder, taken.transitions) == ("me", 5)


async def test_of_candidates_racing_for_a_free_lease_exactly_one_wins(
    admin_client: kube.Client, namespace: str
) -> None:
    ref = lease(namespace)
    won: list[str] = []
    refused: list[str] = []

    async def candidate(name: str) -> None:
        try:
            await leases.try_acquire(client=admin_client, ref=ref, identity=name, timings=FAST)
            won.append(name)
        except leases.Held:
            refused.append(name)

    for _ in range(2):  # first race creates the Lease, the second updates a released one
        won.clear()
        refused.clear()
        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(candidate, f"c{i}")
        assert len(won) == 1 and len(refused) == 5
        record = await leases.read(client=admin_client, ref=ref)
        assert record is not None and record.holder == won[0]
        await leases.release(client=admin_client, holding=leases.Holding(ref=ref, identity=won[0], record=record))


async def test_holding_renews_and_releases_on_the_way_out(admin_client: kube.Client, namespace: str) -> None:
    ref = lease(namespace)
    with anyio.fail_after(GUARD):
        async with leases.hold(client=admin_client, ref=ref, identity="a", timings=FAST) as holding:
            first = holding.record
            while True:  # until the background task renewed it
                live = await leases.read(client=admin_client, ref=ref)
                if live is None or live.resource_version != first.resource_version:
                    break
                await anyio.sleep(0.05)
            assert live is not None and live.holder == "a" and live.renewed and first.renewed
            assert live.renewed > first.renewed and live.acquired == first.acquired
    after = await leases.read(client=admin_client, ref=ref)
    assert after is not None and after.holder == "", "released: a waiting candidate need not wait for expiry"


async def test_the_body_is_cancelled_at_once_when_another_holder_takes_the_lease(
    admin_client: kube.Client, namespace: str
) -> None:
    ref = lease(namespace)
    reached_the_end = False
    with anyio.fail_after(GUARD), pytest.raises(leases.Lost) as lost:
        async with leases.hold(client=admin_client, ref=ref, identity="a", timings=FAST):
            live = await admin_client.get(ref)
            live["spec"]["holderIdentity"] = "intruder"
            await admin_client.update(live)
            await anyio.sleep(GUARD)  # the writing work: cancelled at the next renewal
            reached_the_end = True
    assert not reached_the_end
    assert "taken over by intruder" in str(lost.value)
    assert (await leases.read(client=admin_client, ref=ref)).holder == "intruder"  # type: ignore[union-attr]


async def test_renewals_failing_past_the_deadline_lose_the_lease(
    sandbox: Sandbox, admin_client: kube.Client, namespace: str, kubectl: Kubectl
) -> None:
    """alice may renew until her RoleBinding goes; then every renewal is Forbidden."""
    ref = lease(namespace)
    kubectl("create", "role", ref.name, "-n", namespace, "--verb=get,create,update", "--resource=leases")
    kubectl("create", "rolebinding", ref.name, "-n", namespace, f"--role={ref.name}", "--user=alice")
    alice = await kube.connect(kubeconfig=str(sandbox.kubeconfig), context=f"alice@{credentials.CLUSTER}")
    try:
        with anyio.fail_after(GUARD), pytest.raises(leases.Lost) as lost:
            async with leases.hold(client=alice, ref=ref, identity="alice", timings=FAST):
                kubectl("delete", "rolebinding", ref.name, "-n", namespace)
                await anyio.sleep(GUARD)
    finally:
        await alice.close()
    assert "could not renew" in str(lost.value) and "forbidden" in str(lost.value).lower()


async def test_a_waiting_candidate_takes_over_when_the_holder_releases(
    admin_client: kube.Client, namespace: str
) -> None:
    ref = lease(namespace)
    seen: list[str] = []
    order: list[str] = []
    a_holds = anyio.Event()
    b_waits = anyio.Event()

    def waiting(record: leases.Record) -> None:
        seen.append(record.holder)
        b_waits.set()

    async def a() -> None:
        async with leases.hold(client=admin_client, ref=ref, identity="a", timings=FAST):
            a_holds.set()
            await b_waits.wait()
            order.append("a done")

    async def b() -> None:
        await a_holds.wait()
        with pytest.raises(leases.Held):
            await leases.try_acquire(client=admin_client, ref=ref, identity="b", timings=FAST)
        async with leases.hold(
            client=admin_client, ref=ref, identity="b", timings=FAST, wait=True, on_wait=waiting
        ) as holding:
            order.append("b holds")
            assert holding.record.transitions == 1

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as tg:
            tg.start_soon(a)
            tg.start_soon(b)
    assert seen == ["a"] and order == ["a done", "b holds"]


async def test_errors_of_the_body_pass_unchanged_and_the_lease_is_released(
    admin_client: kube.Client, namespace: str
) -> None:
    ref = lease(namespace)
    with pytest.raises(KeyError):
        async with leases.hold(client=admin_client, ref=ref, identity="a", timings=FAST):
            raise KeyError("mine")
    with anyio.move_on_after(0.2):
        async with leases.hold(client=admin_client, ref=ref, identity="a", timings=FAST):
            await anyio.sleep(GUARD)  # cancelled from outside (Ctrl-C, SIGTERM)
    record = await leases.read(client=admin_client, ref=ref)
    assert record is not None and record.holder == ""
    assert json.dumps(record.lease["spec"]).count("holderIdentity") == 0


SLOW_TRIES = leases.Timings(duration=120.0, renew_deadline=100.0, retry_period=90.0)


async def test_a_waiting_candidate_is_woken_by_the_release_not_by_its_next_try(
    admin_client: kube.Client, namespace: str
) -> None:
    """With 90 s between tries, only the watch on the Lease can hand it over before the guard."""
    ref = lease(namespace)
    waiting = anyio.Event()

    async def holder() -> None:
        async with leases.hold(client=admin_client, ref=ref, identity="a", timings=SLOW_TRIES):
            await waiting.wait()
            await anyio.sleep(0.5)  # the candidate is in its watch by now

    async def candidate() -> None:
        await leases.acquire(
            client=admin_client, ref=ref, identity="b", timings=SLOW_TRIES, wait=True, on_wait=lambda _: waiting.set()
        )

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await anyio.sleep(0.2)
            tg.start_soon(candidate)
    assert (await leases.read(client=admin_client, ref=ref)).holder == "b"  # type: ignore[union-attr]


async def test_a_candidate_that_may_not_watch_polls_instead(
    sandbox: Sandbox, admin_client: kube.Client, namespace: str, kubectl: Kubectl
) -> None:
    ref = lease(namespace)
    kubectl("create", "role", ref.name, "-n", namespace, "--verb=get,create,update", "--resource=leases")
    kubectl("create", "rolebinding", ref.name, "-n", namespace, f"--role={ref.name}", "--user=alice")
    alice = await kube.connect(kubeconfig=str(sandbox.kubeconfig), context=f"alice@{credentials.CLUSTER}")
    try:
        with anyio.fail_after(GUARD):
            async with leases.hold(client=admin_client, ref=ref, identity="a", timings=FAST):
                with anyio.move_on_after(1.0):
                    await leases.acquire(client=alice, ref=ref, identity="alice", timings=FAST, wait=True)
                assert alice.counts.by_verb["watch"] >= 1, "it tried to watch"
            got = await leases.acquire(client=alice, ref=ref, identity="alice", timings=FAST, wait=True)
    finally:
        await alice.close()
    assert got.holder == "alice"
