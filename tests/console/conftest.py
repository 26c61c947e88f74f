"""The console's authentication against real parts: the sandbox's Gitea as the OpenID provider.

``idp`` is a module's Gitea (``tests.forge.conftest.gitea``) with the sandbox's people and
the console's client (``fleet.sandbox.identities``), plus ``mallory``, a member of the team
``masters`` of an organization named ``system``: Gitea gives her the group ``system:masters``.
``log_in`` drives Gitea's real login form, authorize endpoint and consent page with httpx, as
a browser without JavaScript would, and returns the code Gitea sends back.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest

from fleet.console import oidc
from fleet.sandbox import forges, identities
from tests.forge.conftest import Server, gitea

__all__ = ["Idp", "gitea", "http", "idp", "log_in", "provider", "relying_party"]

REDIRECT_URI = "http://127.0.0.1:9/ui/login/callback"
"""Where Gitea sends the browser back: never contacted, the code is read from the Location header."""
MALLORY = identities.Person("mallory", ("system",))


@dataclass(frozen=True)
class Idp:
    forge: forges.Forge
    client: identities.Client
    passwords: dict[str, str]


@pytest.fixture(scope="module")
def idp(gitea: Server) -> Idp:
    forge = gitea.forge
    passwords = identities.provision(forge, people=(*identities.PEOPLE, MALLORY))
    identities.add_team(forge, org="system", team="masters", members=("mallory",))
    client = identities.register(forge, redirect_uris=(REDIRECT_URI,))
    return Idp(forge=forge, client=client, passwords=passwords)


def provider(idp: Idp, **changes: str) -> oidc.Provider:
    c = idp.client
    fields = {
        "issuer": c.issuer,
        "client_id": c.client_id,
        "client_secret": c.client_secret,
        "redirect_uri": REDIRECT_URI,
    }
    return oidc.Provider(**(fields | changes))


@pytest.fixture()
async def http(anyio_backend: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


@pytest.fixture()
async def relying_party(idp: Idp, http: httpx.AsyncClient) -> oidc.RelyingParty:
    return await oidc.discover(provider(idp), http=http)


async def log_in(idp: Idp, user: str, authorize_url: str) -> tuple[str, str]:
    """Log ``user`` in on Gitea's form and follow ``authorize_url`` (granting consent if asked): (code, state)."""
    base = idp.forge.url
    async with httpx.AsyncClient(base_url=base, timeout=30, headers={"Origin": base.rstrip("/")}) as browser:
        page = await browser.get("/user/login")
        assert page.status_code == 200, page.text[:300]
        form = {"user_name": user, "password": idp.passwords[user], **_hidden(page.text, "_csrf")}
        signed_in = await browser.post("/user/login", data=form)
        assert signed_in.status_code in (302, 303), f"login as {user} failed: {signed_in.text[:300]}"
        answer = await browser.get(authorize_url)
        if answer.status_code == 200 and "/login/oauth/grant" in answer.text:
            grant = _hidden(answer.text, "client_id", "state", "scope", "nonce", "redirect_uri", "_csrf")
            answer = await browser.post("/login/oauth/grant", data={**grant, "granted": "true"})
        assert answer.status_code in (302, 303), answer.text[:500]
        location = urljoin(base, answer.headers["location"])
        assert location.startswith(REDIRECT_URI), location
        query = parse_qs(urlsplit(location).query)
        return query["code"][0], query["state"][0]


def _hidden(page: str, *names: str) -> dict[str, str]:
    """The values of the page's hidden inputs ``names`` (those it has)."""
    found = {}
    for name in names:
        match = re.search(rf'<input[^>]*name="{re.escape(name)}"[^>]*value="([^"]*)"', page)
        if match:
            found[name] = html.unescape(match.group(1))
    return found
