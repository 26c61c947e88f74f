"""Bearer tokens checked by the sandbox's real API server (TokenReview), and the answers kept."""

from __future__ import annotations

import csv

import pytest

from fleet import kube
from fleet.console import tokens
from fleet.console.viewers import Unauthenticated
from fleet.sandbox import Sandbox
from tests.conftest import Kubectl

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio]


def service_account_token(kubectl: Kubectl, namespace: str, *, audience: str = "") -> str:
    """A TokenRequest's token for a new ServiceAccount ``reader`` in ``namespace``."""
    kubectl("create", "serviceaccount", "reader", "-n", namespace)
    extra = [f"--audience={audience}"] if audience else []
    return kubectl("create", "token", "reader", "-n", namespace, "--duration=10m", *extra).stdout.strip()


async def test_a_service_account_token_is_that_account(
    admin_client: kube.Client, kubectl: Kubectl, namespace: str
) -> None:
    viewer = await tokens.review(admin_client, service_account_token(kubectl, namespace))
    assert viewer.user == f"system:serviceaccount:{namespace}:reader"
    assert {"system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"} <= set(
        viewer.groups
    )
    assert (viewer.via, viewer.expires) == ("token", 0.0)


async def test_a_static_token_is_its_user(admin_client: kube.Client, sandbox: Sandbox) -> None:
    with (sandbox.directory / "tokens.csv").open() as rows:
        token = next(row[0] for row in csv.reader(rows) if row[1] == "alice")
    viewer = await tokens.review(admin_client, token)
    assert viewer.user == "alice"
    assert {"ml-research", "sandbox:users"} <= set(viewer.groups)


@pytest.mark.parametrize("token", ["garbage", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", "", "two words"])
async def test_a_bad_token_is_unauthenticated(admin_client: kube.Client, token: str) -> None:
    with pytest.raises(Unauthenticated) as refused:
        await tokens.review(admin_client, token)
    assert refused.value.hint == tokens.HINT


async def test_a_token_for_another_audience_is_refused(
    admin_client: kube.Client, kubectl: Kubectl, namespace: str
) -> None:
    token = service_account_token(kubectl, namespace, audience="vault")
    with pytest.raises(Unauthenticated, match="refused the bearer token"):
        await tokens.review(admin_client, token, audiences=("fleet-console",))
    assert (await tokens.review(admin_client, token, audiences=("vault",))).user.endswith(":reader")


async def test_the_review_is_fleets_own_not_the_impersonated_viewers(
    admin_client: kube.Client, kubectl: Kubectl, namespace: str
) -> None:
    """alice may not create TokenReviews: a client impersonating her still reviews as fleet."""
    viewer = await tokens.review(admin_client.impersonating("alice"), service_account_token(kubectl, namespace))
    assert viewer.user.endswith(":reader")


async def test_answers_are_kept_by_the_tokens_hash(admin_client: kube.Client, kubectl: Kubectl, namespace: str) -> None:
    now = [0.0]
    reviews = tokens.Reviews(admin_client, limit=2, ttl=60, clock=lambda: now[0])
    token = service_account_token(kubectl, namespace)
    before = admin_client.counts.by_verb["create"]
    for _ in range(3):
        assert (await reviews.review(token)).user.endswith(":reader")
        with pytest.raises(Unauthenticated):
            await reviews.review("garbage-token")
    assert admin_client.counts.by_verb["create"] - before == 2
    assert all(token.encode() not in key and b"garbage" not in key for key in reviews.answers)

    now[0] = 61.0
    await reviews.review(token)
    assert admin_client.counts.by_verb["create"] - before == 3
    for other in ("a", "b", "c"):
        with pytest.raises(Unauthenticated):
            await reviews.review(other)
    assert len(reviews.answers) == 2
