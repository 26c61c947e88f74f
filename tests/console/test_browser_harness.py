"""The browser harness (tests/browsers.py) and the vendored front-end files, in Debian's Chromium.

A small page on loopback loads the vendored htmx and its server-sent-events extension exactly as the
console will: from ``fleet/console/static``, under the console's Content-Security-Policy, with the
htmx configuration ``fleet/console/static/vendor/htmx/VENDORED.md`` prescribes. The server pushes
one event and the page must change without a reload: that proves the two files work together. The
same page with htmx's default configuration must break the policy, which proves that the policy is
enforced and that a violation would be seen in the browser's log.
"""

from __future__ import annotations

import queue
import struct
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio.to_thread
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tests import browsers, paths
from tests.waits import wait_for

pytestmark = pytest.mark.browser

STATIC = paths.ROOT / "fleet" / "console" / "static"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
HTMX_CONFIG = """<meta name="htmx-config" content='{"includeIndicatorStyles":false,"allowEval":false}'>"""
PIXEL = "data:image/gif;base64,R0lGODlhAQABAAAAACw="


def page(main: str, *, config: str = HTMX_CONFIG) -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fleet console test page</title>
<link rel="icon" href="data:,">
{config}
<script src="/static/vendor/htmx/htmx.min.js"></script>
<script src="/static/vendor/htmx-ext-sse/sse.min.js"></script>
</head>
<body>
<main>
<h1>Fleet</h1>
{main}
</main>
</body>
</html>
"""


LIVE = """<section hx-ext="sse" sse-connect="/events" aria-label="state">
<p id="state" sse-swap="state">Waiting</p>
</section>"""


class Events:
    """The server-sent-events feed: every open stream gets each published fragment."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: list[queue.Queue[str]] = []
        self.opened = 0

    def publish(self, event: str, html: str) -> None:
        with self._lock:
            for stream in self._streams:
                stream.put(f"event: {event}\ndata: {html}\n\n")

    async def stream(self) -> AsyncIterator[str]:
        mine: queue.Queue[str] = queue.Queue()
        with self._lock:
            self._streams.append(mine)
            self.opened += 1
        try:
            yield ": connected\n\n"
            while True:
                yield await anyio.to_thread.run_sync(mine.get, abandon_on_cancel=True)
        finally:
            with self._lock:
                self._streams.remove(mine)


class Policy(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        return response


def make_app(events: Events) -> Starlette:
    async def live(request: Request) -> Response:
        return HTMLResponse(page(LIVE))

    async def default_config(request: Request) -> Response:
        return HTMLResponse(page(LIVE, config=""))

    async def bad(request: Request) -> Response:
        return HTMLResponse(page(f'<img src="{PIXEL}">'))

    async def long(request: Request) -> Response:
        return HTMLResponse(page("\n".join(f"<p>Row {n}</p>" for n in range(200))))

    async def feed(request: Request) -> Response:
        return StreamingResponse(events.stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    return Starlette(
        routes=[
            Route("/", live),
            Route("/default-config", default_config),
            Route("/bad", bad),
            Route("/long", long),
            Route("/events", feed),
            Mount("/static", StaticFiles(directory=STATIC)),
        ],
        middleware=[Middleware(Policy)],
    )


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[str, Events]]:
    events = Events()
    with browsers.serve(make_app(events)) as url:
        yield url, events


def csp_messages(log: list[dict[str, object]]) -> list[str]:
    return [str(entry["message"]) for entry in log if "Content Security Policy" in str(entry["message"])]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_server_sent_event_updates_the_page_without_a_reload_under_the_csp(
    browser: browsers.Browser, site: tuple[str, Events]
) -> None:
    url, events = site
    opened = events.opened
    browser.open(url + "/")
    state = browser.driver.find_element("id", "state")
    assert state.text == "Waiting"
    browser.driver.execute_script("window.notReloaded = true")
    wait_for(lambda: events.opened > opened, what="the page to open its event stream", within=10)

    events.publish("state", "<strong>Ready</strong>")

    wait_for(lambda: state.text == "Ready", what="#state to read Ready", within=10)
    assert browser.driver.find_element("css selector", "#state > strong").text == "Ready"
    assert browser.driver.execute_script("return window.notReloaded") is True
    log = browser.log()
    assert csp_messages(log) == []
    assert [entry for entry in log if entry["level"] == "SEVERE"] == []


def test_htmx_default_configuration_breaks_the_csp(browser: browsers.Browser, site: tuple[str, Events]) -> None:
    url, _ = site
    browser.open(url + "/default-config")
    messages = wait_for(lambda: csp_messages(browser.log()), what="a CSP violation in the browser's log", within=10)
    assert "style-src 'self'" in messages[0]


def test_axe_finds_an_image_without_alternative_text(browser: browsers.Browser, site: tuple[str, Events]) -> None:
    url, _ = site
    browser.open(url + "/bad")
    found = browsers.serious(browsers.axe(browser.driver))
    assert [(v.id, v.impact, v.targets) for v in found] == [("image-alt", "critical", ("img",))]
    assert found[0].help == "Images must have alternative text"


def test_axe_finds_nothing_on_a_good_page(browser: browsers.Browser, site: tuple[str, Events]) -> None:
    url, _ = site
    browser.open(url + "/")
    assert browsers.axe(browser.driver) == []


@pytest.mark.parametrize("size", [browsers.DESKTOP, browsers.PHONE], ids=["desktop", "phone"])
def test_screenshot_is_a_png_of_the_asked_size(
    browser: browsers.Browser, site: tuple[str, Events], tmp_path: Path, size: tuple[int, int]
) -> None:
    url, _ = site
    browser.resize(*size)
    browser.open(url + "/")
    assert browser.driver.execute_script("return [window.innerWidth, window.innerHeight]") == list(size)
    assert png_size(browser.screenshot(tmp_path / "page.png")) == size


def test_screenshot_holds_the_whole_page(browser: browsers.Browser, site: tuple[str, Events], tmp_path: Path) -> None:
    url, _ = site
    browser.open(url + "/long")
    height = browser.driver.execute_script("return document.documentElement.scrollHeight")
    assert height > browsers.DESKTOP[1]
    assert png_size(browser.screenshot(tmp_path / "long.png")) == (browsers.DESKTOP[0], height)


def test_missing_chromium_fails_naming_dev_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(browsers, "CHROMIUM", tmp_path / "chromium")
    with pytest.raises(pytest.fail.Exception, match=r"run \./dev setup"):
        browsers.Browser()
