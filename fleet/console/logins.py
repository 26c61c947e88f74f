"""How a viewer proves who they are, per mode: kubeconfig (local), OIDC, bearer token, or named anonymous.

The console is off in the controller unless a mode is configured; there is no anonymous mode
unless it is named, and then with an identity of its own that RBAC decides for (as Flux
Operator's status page does). Each ``Login`` gives the viewer of a request (None: not logged in)
and the routes it needs:

- ``LocalLogin`` (``fleetctl console``): the person at the keyboard, reading with their kubeconfig.
  The URL it prints carries a one-time key that turns into the session cookie, so another local
  user or a page in the browser cannot read the console through the loopback port.
- ``OidcLogin``: the authorization-code flow with an OIDC provider (Gitea in the sandboxes);
  ``/login`` sends the browser there with state, nonce and a PKCE verifier kept in the session,
  ``/login/callback`` takes the code back and keeps the viewer (user, groups, expiry) in the session.
- ``Bearer``: ``Authorization: Bearer <token>`` checked with a TokenReview, for API clients and
  proxies; it goes with either of the above.
- ``AnonymousLogin``: every request is the one named identity.

Sessions live in starlette's signed cookie (HttpOnly, SameSite=Lax, Secure behind TLS); a viewer
past its expiry is logged out.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from fleet.console import oidc
from fleet.console.viewers import Unauthenticated, Viewer

SESSION_KEY = "viewer"


def _stored(viewer: Viewer) -> dict[str, Any]:
    data = asdict(viewer)
    data["groups"] = list(viewer.groups)
    return data


def session_viewer(request: Request, *, clock: Callable[[], float] = time.time) -> Viewer | None:
    """The viewer the session cookie names, unless expired (then the session is cleared)."""
    data = request.session.get(SESSION_KEY)
    if not isinstance(data, dict):
        return None
    try:
        viewer = Viewer(
            user=str(data["user"]),
            groups=tuple(str(g) for g in data.get("groups") or ()),
            expires=float(data.get("expires") or 0),
            via=data.get("via", "oidc"),
        )
    except (KeyError, TypeError, ValueError):
        request.session.clear()
        return None
    if viewer.expired(now=clock()):
        request.session.clear()
        raise Unauthenticated("your session has expired", hint="log in again")
    return viewer


class Login(Protocol):
    mode: str
    logout: bool
    """Whether the page offers to log out (not for a named anonymous identity)."""

    def routes(self) -> list[BaseRoute]: ...

    async def viewer(self, request: Request) -> Viewer | None: ...

    def login_url(self, request: Request) -> str:
        """Where a viewer who is not logged in goes; "" when there is nowhere (the page says why)."""
        ...


class LocalLogin:
    """The kubeconfig's user at this machine: the key in the printed URL opens a session."""

    mode = "kubeconfig"
    logout = True

    def __init__(self, *, user: str, key: str | None = None) -> None:
        self.user = user
        self.key = key or secrets.token_urlsafe(24)

    def routes(self) -> list[BaseRoute]:
        return []

    async def viewer(self, request: Request) -> Viewer | None:
        given = request.query_params.get("key")
        if given is not None:
            if not hmac.compare_digest(given.encode(), self.key.encode()):
                raise Unauthenticated(
                    "this console key is not the one fleetctl console printed",
                    hint="open the URL fleetctl console printed when it started",
                )
            viewer = Viewer(user=self.user, groups=(), expires=0.0, via="kubeconfig")
            request.session[SESSION_KEY] = _stored(viewer)
            return viewer
        return session_viewer(request)

    def login_url(self, request: Request) -> str:
        return ""


class TokenOnly:
    """No log-in page: only bearer tokens (``Bearer``) say who is looking."""

    mode = "token"
    logout = False

    def routes(self) -> list[BaseRoute]:
        return []

    async def viewer(self, request: Request) -> Viewer | None:
        return None

    def login_url(self, request: Request) -> str:
        return ""


class AnonymousLogin:
    """Everyone is ``user`` (in ``groups``): only when named explicitly."""

    mode = "anonymous"
    logout = False

    def __init__(self, *, user: str, groups: tuple[str, ...] = ()) -> None:
        self.identity = Viewer(user=user, groups=groups, expires=0.0, via="anonymous")

    def routes(self) -> list[BaseRoute]:
        return []

    async def viewer(self, request: Request) -> Viewer | None:
        return self.identity

    def login_url(self, request: Request) -> str:
        return ""


class OidcLogin:
    """Log in with an OIDC provider; the session keeps the viewer until the ID token expires."""

    mode = "oidc"
    logout = True

    def __init__(self, discover: Callable[[], Awaitable[oidc.RelyingParty]]) -> None:
        self.discover = discover
        """Reads the provider's discovery document: at the first log-in, and again until it answers."""
        self._party: oidc.RelyingParty | None = None

    async def party(self) -> oidc.RelyingParty:
        if self._party is None:
            self._party = await self.discover()
        return self._party

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/login", self._login, name="login"),
            Route("/login/callback", self._callback, name="callback"),
        ]

    async def viewer(self, request: Request) -> Viewer | None:
        return session_viewer(request)

    def login_url(self, request: Request) -> str:
        return request.url_for("login").path

    async def _login(self, request: Request) -> Response:
        attempt = oidc.Attempt.new()
        request.session["oidc"] = {"state": attempt.state, "nonce": attempt.nonce, "verifier": attempt.verifier}
        url = (await self.party()).authorize_url(state=attempt.state, nonce=attempt.nonce, verifier=attempt.verifier)
        return RedirectResponse(url, status_code=303)

    async def _callback(self, request: Request) -> Response:
        pending = request.session.pop("oidc", None)
        if not isinstance(pending, dict):
            raise Unauthenticated(
                "this log-in answer does not belong to a log-in started in this browser",
                hint="start again from the console's log-in",
            )
        attempt = oidc.Attempt(
            state=str(pending.get("state")), nonce=str(pending.get("nonce")), verifier=str(pending.get("verifier"))
        )
        viewer = await (await self.party()).callback(attempt=attempt, query=dict(request.query_params))
        request.session[SESSION_KEY] = _stored(viewer)
        return RedirectResponse(request.url_for("fleet").path, status_code=303)


class Bearer:
    """``Authorization: Bearer`` tokens, checked by ``review`` (a TokenReview)."""

    def __init__(self, review: Callable[[str], Awaitable[Viewer]]) -> None:
        self.review = review

    async def viewer(self, request: Request) -> Viewer | None:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if not header:
            return None
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated(
                "the Authorization header is not a bearer token", hint="send Authorization: Bearer TOKEN"
            )
        return await self.review(token.strip())


__all__ = [
    "SESSION_KEY",
    "AnonymousLogin",
    "Bearer",
    "LocalLogin",
    "Login",
    "OidcLogin",
    "TokenOnly",
    "session_viewer",
]
