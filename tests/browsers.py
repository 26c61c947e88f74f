"""The console in a real browser: Debian's Chromium, driven by Selenium through Debian's chromedriver.

Issue 43 asks for the console to be tested as a user sees it, so these tests use the real browser
and never a stand-in: ``./dev setup`` installs the packages ``chromium`` and ``chromium-driver``
(``/usr/bin/chromium``, ``/usr/bin/chromedriver``), and Selenium is given both paths, so nothing
downloads a browser or a driver. Where they are missing the ``browser`` fixture fails, naming
``./dev setup``: a browser test that skipped would pass CI without having looked at a page.

Chromium runs headless with the flags this machine needs: no sandbox (the tests run as root), no
GPU, and no background networking, component updates, sync or QUIC, whose connections the closed
network refuses (slowly, and at every start); each run gets a new empty profile.

- ``browser`` (fixture): a ``Browser`` at 1280x800 with an empty log, one Chromium per session.
  ``Browser.open(url)``, ``.resize(width, height)``, ``.screenshot(path)`` (the full page, PNG),
  ``.log()`` (the browser's console messages since the last call) and ``.driver`` (Selenium's).
- ``axe(driver)``: runs the vendored axe-core (tests/data/axe-core) on the open page and returns
  its violations; ``serious(violations)`` keeps the serious and critical ones.
- ``serve(app)``: an ASGI app served by uvicorn on loopback in a thread, for the browser to load.

Add ``pytestmark = pytest.mark.browser`` to a module that uses them.
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from starlette.types import ASGIApp

from tests import paths
from tests.waits import wait_for

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
DESKTOP = (1280, 800)
PHONE = (390, 844)
AXE = paths.DATA / "axe-core" / "axe.min.js"


@dataclass(frozen=True)
class Violation:
    """One axe-core rule the page breaks: ``targets`` are the CSS selectors of the offending nodes."""

    id: str
    impact: str | None
    help: str
    targets: tuple[str, ...]


class Browser:
    """One headless Chromium and its chromedriver; ``close()`` ends both."""

    def __init__(self, *, width: int = DESKTOP[0], height: int = DESKTOP[1]) -> None:
        missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
        if missing:
            pytest.fail(
                f"the browser tests need Debian's Chromium: {', '.join(missing)} missing; "
                "run ./dev setup (as root it installs the packages chromium and chromium-driver)",
                pytrace=False,
            )
        self._profile = tempfile.mkdtemp(prefix="fleet-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in (*FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # A page's alert (Gitea built without its front-end bundle says so in one) is accepted, not
        # left to break the next command.
        options.set_capability("unhandledPromptBehavior", "accept")
        try:
            self.driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
        except Exception:
            shutil.rmtree(self._profile, ignore_errors=True)
            raise
        self.driver.set_script_timeout(60)
        self.resize(width, height)

    def open(self, url: str) -> None:
        """Load ``url`` and wait until the document has loaded (Selenium's page-load strategy)."""
        self.driver.get(url)

    def resize(self, width: int, height: int) -> None:
        """Make the viewport ``width`` x ``height`` CSS pixels at scale 1; below 600 wide, as a phone
        (touch, overlay scrollbars, ``<meta name="viewport">`` honoured)."""
        self.driver.set_window_size(width, height)
        self.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )

    def screenshot(self, path: Path) -> Path:
        """Write the whole page as a PNG (the viewport's width, the document's height if taller)."""
        width, height = self.driver.execute_script(
            "const e = document.documentElement;"
            "return [Math.max(e.scrollWidth, window.innerWidth), Math.max(e.scrollHeight, window.innerHeight)];"
        )
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
            },
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def log(self) -> list[dict[str, Any]]:
        """The console's messages since the last call (``level``, ``source``, ``message``), CSP
        violations among them."""
        return list(self.driver.get_log("browser"))

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self._profile, ignore_errors=True)


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    """The session's one Chromium; tests take ``browser``, which resets it."""
    started = Browser()
    try:
        yield started
    finally:
        started.close()


@pytest.fixture()
def browser(chromium: Browser) -> Browser:
    """The session's Chromium on a blank page at 1280x800, its console log emptied."""
    chromium.open("about:blank")
    chromium.resize(*DESKTOP)
    chromium.log()
    return chromium


_RUN_AXE = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]})
  .then((result) => done({violations: result.violations}))
  .catch((error) => done({error: String(error)}));
"""


def axe(driver: webdriver.Chrome) -> list[Violation]:
    """Run axe-core's default rules (WCAG 2.x A and AA, and best practices) on the open page."""
    if not driver.execute_script("return typeof window.axe === 'object'"):
        driver.execute_script(AXE.read_text(encoding="utf-8"))
    answer = driver.execute_async_script(_RUN_AXE)
    if "error" in answer:
        raise AssertionError(f"axe-core failed on {driver.current_url}: {answer['error']}")
    return [
        Violation(
            id=found["id"],
            impact=found["impact"],
            help=found["help"],
            targets=tuple(" ".join(map(str, node["target"])) for node in found["nodes"]),
        )
        for found in answer["violations"]
    ]


def serious(violations: list[Violation]) -> list[Violation]:
    """The violations issue 43 forbids on every page: impact serious or critical."""
    return [found for found in violations if found.impact in ("serious", "critical")]


@contextlib.contextmanager
def serve(app: ASGIApp) -> Iterator[str]:
    """Serve ``app`` on a free loopback port in a thread; yields its base URL (no trailing slash).

    Streams still open at exit (server-sent events) are cut after a second."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="warning", timeout_graceful_shutdown=1)
    )
    thread = threading.Thread(target=server.run, name="browsers.serve", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), what="uvicorn to listen", within=30)
        if not server.started:
            raise AssertionError("uvicorn stopped before it listened")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
