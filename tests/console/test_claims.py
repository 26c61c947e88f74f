"""The pure parts of the console's login: names from claims, the system: rule, PKCE, the authorize URL."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from fleet.console import oidc
from fleet.console.viewers import Unauthenticated, Viewer

PROVIDER = oidc.Provider(
    issuer="https://idp.example",
    client_id="console",
    client_secret="s3cret",
    redirect_uri="https://fleet.example/ui/login/callback",
)


def viewer(claims: dict[str, Any], **changes: Any) -> Viewer:
    provider = oidc.Provider(**(vars(PROVIDER) | changes))
    return oidc.claims_viewer({"exp": 1_900_000_000} | claims, provider=provider)


def test_the_username_and_groups_claims_name_the_viewer() -> None:
    seen = viewer({"preferred_username": "alice", "groups": ["inference-oncall", "inference-oncall:owners"]})
    assert seen == Viewer(
        user="alice", groups=("inference-oncall", "inference-oncall:owners"), expires=1.9e9, via="oidc"
    )


def test_system_groups_are_dropped_and_the_rest_kept_once() -> None:
    seen = viewer(
        {
            "preferred_username": "mallory",
            "groups": ["system", "system:masters", "dev", "dev", "", "system:authenticated"],
        }
    )
    assert seen.groups == ("system", "dev")


def test_a_group_prefix_makes_every_group_safe_to_keep() -> None:
    seen = viewer({"preferred_username": "mallory", "groups": ["system:masters", "dev"]}, group_prefix="gitea:")
    assert seen.groups == ("gitea:system:masters", "gitea:dev")


def test_a_system_username_is_refused_unless_prefixed() -> None:
    with pytest.raises(Unauthenticated, match="reserved 'system:' space") as refused:
        viewer({"preferred_username": "system:kube-controller-manager"})
    assert refused.value.hint
    assert viewer({"preferred_username": "system:x"}, user_prefix="oidc:").user == "oidc:system:x"


@pytest.mark.parametrize("prefix", ["user_prefix", "group_prefix"])
def test_a_system_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(oidc.ProviderError, match="reserves"):
        oidc.Provider(**(vars(PROVIDER) | {prefix: "system:oidc:"}))


def test_other_claims_can_name_the_viewer() -> None:
    seen = viewer({"email": "a@example.com", "roles": "admins"}, username_claim="email", groups_claim="roles")
    assert (seen.user, seen.groups) == ("a@example.com", ("admins",))


@pytest.mark.parametrize(
    ("claims", "refusal"),
    [
        ({}, "no 'preferred_username' claim"),
        ({"preferred_username": ""}, "no 'preferred_username' claim"),
        ({"preferred_username": 7}, "no 'preferred_username' claim"),
        ({"preferred_username": "a", "groups": {"x": 1}}, "not a list of names"),
        ({"preferred_username": "a", "groups": ["x", 1]}, "not a list of names"),
    ],
)
def test_malformed_claims_are_refused(claims: dict[str, Any], refusal: str) -> None:
    with pytest.raises(Unauthenticated, match=refusal):
        viewer(claims)


def test_no_groups_claim_is_no_groups() -> None:
    assert viewer({"preferred_username": "a"}).groups == ()


def test_the_pkce_challenge_is_rfc_7636s() -> None:
    """RFC 7636, appendix B."""
    assert (
        oidc.challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )


def test_each_attempt_is_new() -> None:
    one, two = oidc.Attempt.new(), oidc.Attempt.new()
    assert len({one.state, one.nonce, one.verifier, two.state, two.nonce, two.verifier}) == 6
    assert 43 <= len(one.verifier) <= 128  # RFC 7636 §4.1


def test_the_authorize_url_asks_for_a_code_with_pkce() -> None:
    metadata = {
        f"{e}": f"https://idp.example/{e}?tenant=1" for e in ("authorization_endpoint", "token_endpoint", "jwks_uri")
    }
    rp = oidc.RelyingParty(provider=PROVIDER, http=httpx.AsyncClient(), metadata=metadata)
    url = urlsplit(rp.authorize_url(state="st", nonce="no", verifier="v" * 43))
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert url.path == "/authorization_endpoint"
    assert query == {
        "tenant": "1",
        "response_type": "code",
        "client_id": "console",
        "redirect_uri": PROVIDER.redirect_uri,
        "scope": "openid profile email groups",
        "state": "st",
        "nonce": "no",
        "code_challenge": oidc.challenge("v" * 43),
        "code_challenge_method": "S256",
    }


def test_the_secret_stays_out_of_reprs() -> None:
    assert "s3cret" not in repr(PROVIDER)


def test_a_viewer_expires_at_its_time_or_never() -> None:
    assert Viewer(user="a", groups=(), expires=10.0, via="oidc").expired(now=10.0)
    assert not Viewer(user="a", groups=(), expires=10.0, via="oidc").expired(now=9.9)
    assert not Viewer(user="a", groups=(), expires=0.0, via="token").expired(now=1e12)


@pytest.mark.anyio
@pytest.mark.parametrize(("query", "refusal"), [
    ({"error": "access_denied", "error_description": "the request is denied", "state": "st"}, "access_denied"),
    ({"code": "c", "state": "other"}, "state is not the one"),
    ({"code": "c"}, "state is not the one"),
    ({"state": "st"}, "no login code"),
])  # fmt: skip
async def test_a_callback_not_for_this_attempt_is_refused_before_any_exchange(
    query: dict[str, str], refusal: str
) -> None:
    metadata = {e: f"https://idp.invalid/{e}" for e in ("authorization_endpoint", "token_endpoint", "jwks_uri")}
    async with httpx.AsyncClient() as http:
        rp = oidc.RelyingParty(provider=PROVIDER, http=http, metadata=metadata)
        with pytest.raises(Unauthenticated, match=refusal):
            await rp.callback(attempt=oidc.Attempt(state="st", nonce="n", verifier="v" * 43), query=query)
