"""The console's HTTP answers: who gets in, what every answer carries, and the pages' errors.

The app is the one both front doors serve (``apps.build``), given fixed snapshots of a cluster
(``tests.console.snapshots``): what is tested here is HTTP behaviour, not cluster behaviour,
which the sandbox and browser tests cover.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from itsdangerous import TimestampSigner

from fleet.console import apps, logins
from fleet.console.viewers import Unauthenticated, Viewer
from tests.browsers import serve
from tests.console.snapshots import Fixed, snapshot

SECRET = "test-secret"
Client = Callable[..., httpx.Client]


@pytest.fixture()
def client() -> Iterator[Client]:
    """Serves an app (uvicorn on loopback, as the front doors do) and gives an HTTP client of it."""
    with contextlib.ExitStack() as stack:

        def make(login: logins.Login | None = None, source: Any = None, **kw: Any) -> httpx.Client:
            login = login or logins.LocalLogin(user="me", key="the-key")
            app, _ = apps.build(source=source or Fixed(snapshot()), login=login, secret=SECRET, **kw)
            url = stack.enter_context(serve(app))
            return stack.enter_context(httpx.Client(base_url=url, timeout=30))

        yield make


def logged_in(client: Client) -> httpx.Client:
    http = client()
    opened = http.get("/?key=the-key")
    assert opened.status_code == 303 and opened.headers["location"] == f"{http.base_url}/".replace("//", "//", 1)
    return http


def cookie(data: dict[str, object], *, key: str = SECRET) -> str:
    """A session cookie as starlette's SessionMiddleware signs it (with ``key``)."""
    return TimestampSigner(key).sign(base64.b64encode(json.dumps(data).encode())).decode()


def test_the_printed_key_opens_a_session_with_a_closed_cookie(client: Client) -> None:
    http = client()
    opened = http.get("/?key=the-key")
    set_cookie = opened.headers["set-cookie"].lower()
    assert "httponly" in set_cookie and "samesite=lax" in set_cookie and "secure" not in set_cookie
    page = http.get("/")
    assert page.status_code == 200 and "gpu-east" in page.text and "me" in page.text


def test_behind_tls_the_cookie_is_secure(client: Client) -> None:
    http = client(secure=True)
    assert "secure" in http.get("/?key=the-key").headers["set-cookie"].lower()


@pytest.mark.parametrize("path", ["/", "/clusters/gpu-east", "/clusters/gpu-east/gpus", "/events"])
def test_without_a_session_every_page_is_a_401_that_says_what_to_do(client: Client, path: str) -> None:
    http = client()
    answer = http.get(path)
    assert answer.status_code == 401
    assert "fleetctl console printed" in answer.text and "Traceback" not in answer.text


def test_a_wrong_key_and_a_forged_cookie_are_refused(client: Client) -> None:
    http = client()
    assert http.get("/?key=guess").status_code == 401
    http.cookies.set("fleet_console", "eyJ2aWV3ZXIiOiB7InVzZXIiOiAiYWRtaW4ifX0=.forged.signature")
    assert http.get("/").status_code == 401
    http.cookies.set("fleet_console", cookie({"viewer": {"user": "me", "via": "kubeconfig"}}, key="another key"))
    assert http.get("/").status_code == 401, "a cookie signed with another key"


def test_an_expired_session_is_a_401_saying_so(client: Client) -> None:
    http = client()
    past = {"viewer": {"user": "alice", "groups": [], "expires": time.time() - 1, "via": "oidc"}}
    http.cookies.set("fleet_console", cookie(past))
    answer = http.get("/")
    assert answer.status_code == 401 and "expired" in answer.text


def test_every_answer_carries_the_security_headers(client: Client) -> None:
    http = logged_in(client)
    for path in ("/", "/clusters/gpu-east/gpus", "/static/console.css", "/nowhere"):
        headers = http.get(path).headers
        assert headers["content-security-policy"] == apps.CSP, path
        assert "'unsafe-inline'" not in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"


def test_unknown_clusters_teams_and_pages_are_404_pages(client: Client) -> None:
    http = logged_in(client)
    cluster = http.get("/clusters/gpu-nowhere")
    assert cluster.status_code == 404 and "no cluster 'gpu-nowhere'" in html.unescape(cluster.text)
    team = http.get("/clusters/gpu-east/teams/nobody")
    assert team.status_code == 404 and "no team 'nobody'" in html.unescape(team.text)
    assert http.get("/no/such/page").status_code == 404


def test_pages_answer_json_to_api_clients(client: Client) -> None:
    http = logged_in(client)
    (row,) = http.get("/", headers={"accept": "application/json"}).json()
    assert (row["cluster"], row["state"]) == ("gpu-east", "Ready")
    gpus = http.get("/clusters/gpu-east/gpus?o=json").json()
    assert {d["name"]: d["claim"] for d in gpus["devices"]}["gpu-0"] == "inference/server-gpu"
    assert http.get("/clusters/nowhere?o=json").json()["error"].startswith("no cluster")


def test_bearer_tokens_are_reviewed_and_bad_ones_refused(client: Client) -> None:
    async def review(token: str) -> Viewer:
        if token != "good":
            raise Unauthenticated("the API server does not know this token", hint="get a new one")
        return Viewer(user="robot", groups=(), expires=0.0, via="token")

    http = client(bearer=logins.Bearer(review))
    assert http.get("/", headers={"authorization": "Bearer good"}).status_code == 200
    refused = http.get("/", headers={"authorization": "Bearer bad", "accept": "application/json"})
    assert refused.status_code == 401 and refused.json()["error"] == "the API server does not know this token"
    assert http.get("/", headers={"authorization": "Basic x"}).status_code == 401


def test_logging_out_ends_the_session(client: Client) -> None:
    http = logged_in(client)
    out = http.post("/logout")
    assert out.status_code == 200 and "logged out" in out.text.lower()
    assert http.get("/").status_code == 401


def test_an_unexpected_failure_is_a_page_without_a_traceback(client: Client) -> None:
    class Broken(Fixed):
        async def snapshot(self, cluster: str):  # type: ignore[no-untyped-def]
            raise RuntimeError("secret internals")

    answer = client(source=Broken(snapshot()), login=logins.AnonymousLogin(user="viewer")).get("/")
    assert answer.status_code == 500
    assert "secret internals" not in answer.text and "Traceback" not in answer.text


def test_anonymous_viewers_have_the_named_identity_and_no_logout(client: Client) -> None:
    http = client(login=logins.AnonymousLogin(user="fleet-console-viewer"))
    page = http.get("/")
    assert page.status_code == 200 and "fleet-console-viewer" in page.text and "Log out" not in page.text
