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
  ``/callback`` takes the code back and keeps the viewer (user, groups, expiry) in the session.
- ``Bearer``: ``Authorization: Bearer <token>`` checked with a TokenReview, for API clients and
  proxies; it goes with either of the above.
- ``AnonymousLogin``: every request is the one named identity.

Sessions live in starlette's signed cookie (HttpOnly, SameSite=Lax, Secure behind TLS); a viewer
past its expiry is logged out.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

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
    if viewer.expires and viewer.expires <= clock():
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
            viewer = Viewer(user=self.user, via="kubeconfig")
            request.session[SESSION_KEY] = _stored(viewer)
            return viewer
        return session_viewer(request)

    def login_url(self, request: Request) -> str:
        return ""


class AnonymousLogin:
    """Everyone is ``user`` (in ``groups``): only when named explicitly."""

    mode = "anonymous"
    logout = False

    def __init__(self, *, user: str, groups: tuple[str, ...] = ()) -> None:
        self.identity = Viewer(user=user, groups=groups, via="anonymous")

    def routes(self) -> list[BaseRoute]:
        return []

    async def viewer(self, request: Request) -> Viewer | None:
        return self.identity

    def login_url(self, request: Request) -> str:
        return ""


class RelyingParty(Protocol):
    """The OIDC client (``fleet.console.oidc``): where to send the browser, and the code's viewer."""

    def authorize_url(self, state: str, nonce: str, verifier: str) -> str: ...

    async def exchange(self, code: str, verifier: str, nonce: str) -> Viewer: ...


class OidcLogin:
    """Log in with an OIDC provider; the session keeps the viewer until the ID token expires."""

    mode = "oidc"
    logout = True

    def __init__(self, party: RelyingParty) -> None:
        self.party = party

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/login", self._login, name="login"),
            Route("/callback", self._callback, name="callback"),
        ]

    async def viewer(self, request: Request) -> Viewer | None:
        return session_viewer(request)

    def login_url(self, request: Request) -> str:
        return str(request.url_for("login"))

    async def _login(self, request: Request) -> Response:
        state, nonce, verifier = (secrets.token_urlsafe(24) for _ in range(3))
        request.session["oidc"] = {"state": state, "nonce": nonce, "verifier": verifier}
        return RedirectResponse(self.party.authorize_url(state, nonce, verifier), status_code=303)

    async def _callback(self, request: Request) -> Response:
        pending = request.session.pop("oidc", None)
        if request.query_params.get("error"):
            said = request.query_params.get("error_description") or request.query_params["error"]
            raise Unauthenticated(
                f"the identity provider refused the log-in: {said}",
                hint="log in again, or ask your administrator about your account",
            )
        state = request.query_params.get("state", "")
        if not isinstance(pending, dict) or not hmac.compare_digest(state.encode(), str(pending.get("state")).encode()):
            raise Unauthenticated(
                "this log-in answer does not belong to a log-in started here (state does not match)",
                hint="start again from the console's log-in",
            )
        code = request.query_params.get("code")
        if not code:
            raise Unauthenticated("the identity provider sent no code", hint="log in again")
        viewer = await self.party.exchange(code, str(pending["verifier"]), str(pending["nonce"]))
        request.session[SESSION_KEY] = _stored(viewer)
        return RedirectResponse(str(request.url_for("fleet")), status_code=303)


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


def pkce_challenge(verifier: str) -> str:
    """The S256 code challenge of a PKCE verifier (RFC 7636)."""
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


__all__ = [
    "SESSION_KEY",
    "AnonymousLogin",
    "Bearer",
    "LocalLogin",
    "Login",
    "OidcLogin",
    "RelyingParty",
    "pkce_challenge",
    "session_viewer",
]
