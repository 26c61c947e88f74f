"""429 from the real API server's priority-and-fairness: typed, Retry-After honoured, retried to success.

The test gives user bob a priority level with one concurrency share and no queue
(``limitResponse: Reject``), so bursts of heavy lists by bob are rejected with 429
and a ``Retry-After`` header, exactly as an overloaded production API server does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import pytest

from fleet import kube
from fleet.sandbox import Sandbox, credentials
from tests.conftest import Kubectl

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio]

THROTTLE = [
    {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "fleet-test-throttle"},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 1,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        },
    },
    {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": "fleet-test-throttle"},
        "spec": {
            "priorityLevelConfiguration": {"name": "fleet-test-throttle"},
            "matchingPrecedence": 100,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": "bob"}}],
                    "resourceRules": [
                        {
                            "verbs": ["*"],
                            "apiGroups": ["*"],
                            "resources": ["*"],
                            "clusterScope": True,
                            "namespaces": ["*"],
                        }
                    ],
                }
            ],
        },
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "fleet-test-throttle"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}],
    },
]


@pytest.fixture()
def throttled_bob(kubectl: Kubectl, namespace: str) -> Iterator[str]:
    """bob throttled; ``namespace`` holds 300 ConfigMaps so that listing them takes a while."""
    maps = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"c{i}", "namespace": namespace},
            "data": {"payload": "x" * 4096},
        }
        for i in range(300)
    ]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": maps}))
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": THROTTLE}))
    try:
        yield namespace
    finally:
        for obj in reversed(THROTTLE):
            kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found", check=False)


async def _burst(client: kube.Client, namespace: str, n: int = 40) -> tuple[int, list[kube.TooManyRequests]]:
    """``n`` concurrent lists: how many succeeded, and the 429s."""
    kind = await client.kind(api_version="v1", kind="ConfigMap")
    ok = 0
    throttled: list[kube.TooManyRequests] = []

    async def one() -> None:
        nonlocal ok
        try:
            await client.list(kind, namespace=namespace)
            ok += 1
        except kube.TooManyRequests as err:
            throttled.append(err)

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    return ok, throttled


async def _bob(sandbox: Sandbox, policy: kube.RetryPolicy) -> kube.Client:
    client = await kube.connect(kubeconfig=str(sandbox.kubeconfig), context=f"bob@{credentials.CLUSTER}")
    client.retry = policy
    return client


async def test_429_is_typed_with_retry_after(sandbox: Sandbox, throttled_bob: str) -> None:
    client = await _bob(sandbox, kube.RetryPolicy(attempts=1))
    throttled: list[kube.TooManyRequests] = []
    try:
        with anyio.fail_after(60):
            while not throttled:  # the priority level takes effect within a second or two
                _, throttled = await _burst(client, throttled_bob)
    finally:
        await client.close()
    assert all(err.status == 429 and err.retry_after >= 1 for err in throttled)
    assert "hint: the API server is overloaded" in str(throttled[0])


async def test_429_is_retried_after_the_servers_delay(sandbox: Sandbox, throttled_bob: str) -> None:
    client = await _bob(sandbox, kube.RetryPolicy(attempts=1))
    try:
        with anyio.fail_after(60):
            while not (await _burst(client, throttled_bob))[1]:
                pass  # wait until bob is being throttled
        client.retry = kube.RetryPolicy(attempts=30, retry_after_cap=2.0)
        before = client.counts.by_verb["list"]
        started = anyio.current_time()
        ok, throttled = await _burst(client, throttled_bob)
        waited = anyio.current_time() - started
    finally:
        await client.close()
    assert (ok, throttled) == (40, [])
    assert client.counts.by_verb["list"] - before > 40, "some lists were rejected and retried"
    assert waited >= 1.0, "retries waited for Retry-After"
