"""OpenID Connect login against the sandbox's real Gitea: discovery, the code flow, and each forgery refused."""

from __future__ import annotations

import time

import httpx
import pytest
from joserfc import jwk, jwt

from fleet.console import oidc
from fleet.console.viewers import Unauthenticated
from fleet.sandbox import identities
from tests.console.conftest import REDIRECT_URI, Idp, log_in, provider

pytestmark = [pytest.mark.extras("gitea"), pytest.mark.anyio]


async def logged_in(idp: Idp, rp: oidc.RelyingParty, user: str) -> tuple[oidc.Attempt, str]:
    """(the attempt, the code Gitea sent back for it) after ``user`` logs in."""
    attempt = oidc.Attempt.new()
    code, state = await log_in(
        idp, user, rp.authorize_url(state=attempt.state, nonce=attempt.nonce, verifier=attempt.verifier)
    )
    assert state == attempt.state
    return attempt, code


async def test_discovery_reads_giteas_endpoints(idp: Idp, relying_party: oidc.RelyingParty) -> None:
    base = idp.forge.url
    assert idp.client.issuer == base.rstrip("/")
    assert relying_party.authorization_endpoint == f"{base}login/oauth/authorize"
    assert relying_party.token_endpoint == f"{base}login/oauth/access_token"
    assert relying_party.jwks_uri == f"{base}login/oauth/keys"


async def test_discovery_refuses_an_issuer_with_a_trailing_slash(idp: Idp, http: httpx.AsyncClient) -> None:
    with pytest.raises(oidc.ProviderError, match="calls itself"):
        await oidc.discover(provider(idp, issuer=idp.forge.url), http=http)


@pytest.mark.parametrize(
    ("user", "group", "not_group"),
    [
        ("alice", "ml-research-admins", "inference-oncall"),
        ("bob", "inference-oncall", "ml-research-admins"),
        ("fleet", "fleet-admins", "inference-oncall"),
    ],
)
async def test_code_flow_names_the_user_and_their_orgs(
    idp: Idp, relying_party: oidc.RelyingParty, user: str, group: str, not_group: str
) -> None:
    attempt, code = await logged_in(idp, relying_party, user)
    viewer = await relying_party.callback(attempt=attempt, query={"code": code, "state": attempt.state})
    assert viewer.user == user
    assert group in viewer.groups
    assert f"{group}:owners" in viewer.groups  # Gitea's org:team
    assert not_group not in viewer.groups
    assert viewer.via == "oidc"
    assert time.time() < viewer.expires < time.time() + 2 * 3600


async def test_a_system_team_never_becomes_a_system_group(idp: Idp, http: httpx.AsyncClient) -> None:
    """Gitea names mallory's team ``masters`` of the org ``system`` as ``system:masters``: dropped."""
    rp = await oidc.discover(provider(idp), http=http)
    attempt, code = await logged_in(idp, rp, "mallory")
    viewer = await rp.exchange(code=code, verifier=attempt.verifier, nonce=attempt.nonce)
    assert viewer.user == "mallory"
    assert viewer.groups == ("system",)

    prefixed = await oidc.discover(provider(idp, group_prefix="gitea:"), http=http)
    attempt, code = await logged_in(idp, prefixed, "mallory")
    viewer = await prefixed.exchange(code=code, verifier=attempt.verifier, nonce=attempt.nonce)
    assert set(viewer.groups) == {"gitea:system", "gitea:system:masters", "gitea:system:owners"}


async def test_a_wrong_nonce_is_refused(idp: Idp, relying_party: oidc.RelyingParty) -> None:
    attempt, code = await logged_in(idp, relying_party, "alice")
    with pytest.raises(Unauthenticated, match="'nonce' claim"):
        await relying_party.exchange(code=code, verifier=attempt.verifier, nonce=oidc.Attempt.new().nonce)


async def test_an_expired_id_token_is_refused(idp: Idp, relying_party: oidc.RelyingParty) -> None:
    attempt, code = await logged_in(idp, relying_party, "alice")
    relying_party.clock = lambda: time.time() + 2 * 3600
    with pytest.raises(Unauthenticated, match="expired") as refused:
        await relying_party.exchange(code=code, verifier=attempt.verifier, nonce=attempt.nonce)
    assert refused.value.hint == oidc.RELOGIN


async def test_a_code_is_good_once_and_only_with_its_verifier(idp: Idp, relying_party: oidc.RelyingParty) -> None:
    attempt, code = await logged_in(idp, relying_party, "alice")
    with pytest.raises(Unauthenticated, match="refused the login code"):
        await relying_party.exchange(code=code, verifier=oidc.Attempt.new().verifier, nonce=attempt.nonce)
    attempt, code = await logged_in(idp, relying_party, "alice")
    await relying_party.exchange(code=code, verifier=attempt.verifier, nonce=attempt.nonce)
    with pytest.raises(Unauthenticated, match="refused the login code"):
        await relying_party.exchange(code=code, verifier=attempt.verifier, nonce=attempt.nonce)


async def test_a_token_signed_by_another_key_is_refused(idp: Idp, http: httpx.AsyncClient) -> None:
    """Claims Gitea would issue, signed by a key it never had: under its ``kid`` and under a new one."""
    fetches: list[str] = []

    async def count(request: httpx.Request) -> None:
        if request.url.path.endswith("/login/oauth/keys"):
            fetches.append(str(request.url))

    http.event_hooks["request"].append(count)
    rp = await oidc.discover(provider(idp), http=http)
    attempt, code = await logged_in(idp, rp, "alice")
    await rp.exchange(code=code, verifier=attempt.verifier, nonce=attempt.nonce)
    assert len(fetches) == 1
    published = (await http.get(rp.jwks_uri)).json()["keys"][0]["kid"]
    fetches.clear()
    rp.clock = lambda: time.time() + oidc.KEYS_REFRESH  # a minute after the keys were fetched

    forger = jwk.RSAKey.generate_key(2048)
    now = int(time.time())
    claims = {
        "iss": idp.client.issuer,
        "aud": idp.client.client_id,
        "sub": "1",
        "iat": now,
        "exp": now + 600,
        "nonce": "n",
        "preferred_username": "fleet",
        "groups": ["fleet-admins"],
    }
    for kid, refusal in (
        (published, "signature does not verify"),
        ("forged-1", "does not publish"),
        ("forged-2", "does not publish"),
    ):
        forged = jwt.encode({"alg": "RS256", "kid": kid}, claims, forger)
        with pytest.raises(Unauthenticated, match=refusal):
            await rp.verify(forged, nonce="n")
    assert len(fetches) == 1, "unknown kids fetch the keys again once a minute, not once a token"

    unsigned = jwt.encode({"alg": "HS256", "kid": published}, claims, jwk.OctKey.import_key(idp.client.client_secret))
    with pytest.raises(Unauthenticated, match="signed with 'HS256'"):
        await rp.verify(unsigned, nonce="n")


async def test_the_redirect_uri_is_registered_exactly(idp: Idp, relying_party: oidc.RelyingParty) -> None:
    assert idp.client.redirect_uris == (REDIRECT_URI,)
    stray = oidc.RelyingParty(
        provider=provider(idp, redirect_uri="http://127.0.0.1:9/elsewhere"),
        http=relying_party.http,
        metadata={
            "authorization_endpoint": relying_party.authorization_endpoint,
            "token_endpoint": relying_party.token_endpoint,
            "jwks_uri": relying_party.jwks_uri,
        },
    )
    attempt = oidc.Attempt.new()
    with pytest.raises(AssertionError):
        await log_in(
            idp, "alice", stray.authorize_url(state=attempt.state, nonce=attempt.nonce, verifier=attempt.verifier)
        )


async def test_the_sandbox_keeps_its_secrets_private_and_registers_again_in_place(idp: Idp) -> None:
    again = identities.register(idp.forge, redirect_uris=(REDIRECT_URI, "http://127.0.0.1:8/ui/login/callback"))
    assert (again.client_id, again.client_secret) == (idp.client.client_id, idp.client.client_secret)
    assert identities.provision(idp.forge) == idp.passwords
    for path in (identities.client_file(idp.forge), identities.people_file(idp.forge)):
        assert path.stat().st_mode & 0o777 == 0o600
    assert idp.client.client_secret not in repr(again)
    identities.register(idp.forge, redirect_uris=(REDIRECT_URI,))
