"""Walking the console's pages in the real browser: each page checked by axe and photographed.

``walk`` opens every page of a cluster (fleet, cluster, GPUs, teams, a team), checks that axe-core
finds no serious or critical violation and that the browser logged no error (a CSP violation,
a failed script), and takes each page's screenshot at 1280x800 and at 390x844. The screenshots go
to the test's folder, or to ``docs/images`` when ``FLEET_CONSOLE_SCREENSHOTS=docs/images`` (how
the README's pictures are made: ``tools/console-screenshots``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from selenium.webdriver.common.by import By

from tests import browsers, paths
from tests.waits import wait_for

PAGES = ("fleet", "cluster", "gpus", "node", "teams", "team")


def shots(default: Path) -> Path:
    chosen = os.environ.get("FLEET_CONSOLE_SCREENSHOTS")
    folder = (paths.ROOT / chosen) if chosen else default
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def urls(base: str, cluster: str, team: str, node: str) -> dict[str, str]:
    return {
        "fleet": f"{base}/",
        "cluster": f"{base}/clusters/{cluster}",
        "gpus": f"{base}/clusters/{cluster}/gpus",
        "node": f"{base}/clusters/{cluster}/gpus/{node}",
        "teams": f"{base}/clusters/{cluster}/teams",
        "team": f"{base}/clusters/{cluster}/teams/{team}",
    }


def held_by_node(kubectl: Callable[..., subprocess.CompletedProcess[str]], namespaces: list[str]) -> dict[str, str]:
    """``namespace/claim`` → the node of its device, for the allocated claims of ``namespaces``, as
    kubectl reads them (in the sandbox a device's pool is its node)."""
    claims = json.loads(kubectl("get", "resourceclaims", "-A", "-o", "json").stdout)["items"]
    out = {}
    for claim in claims:
        meta = claim["metadata"]
        for result in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
            if meta["namespace"] in namespaces:
                out[f"{meta['namespace']}/{meta['name']}"] = result["pool"]
    return out


def text(browser: browsers.Browser) -> str:
    """The page's main part as a person reads it, every node's details opened."""
    browser.driver.execute_script("document.querySelectorAll('main details').forEach((d) => { d.open = true; })")
    return str(browser.driver.find_element(By.TAG_NAME, "main").text)


def walk(
    browser: browsers.Browser, base: str, *, cluster: str, team: str, node: str, folder: Path, prefix: str
) -> dict[str, str]:
    """Visit every page (``node``'s page for the node page); the text of each page's main part, by page."""
    seen: dict[str, str] = {}
    for page, url in urls(base, cluster, team, node).items():
        browser.resize(*browsers.DESKTOP)
        browser.open(url)
        wait_for(lambda: browser.driver.find_elements(By.CSS_SELECTOR, "main h1"), what=f"{page} to render")
        found = browsers.serious(browsers.axe(browser.driver))
        assert found == [], f"{page}: {found}"
        errors = [entry for entry in browser.log() if entry.get("level") == "SEVERE"]
        assert errors == [], f"{page}: the browser logged {errors}"
        browser.screenshot(folder / f"{prefix}-{page}.png")
        seen[page] = text(browser)
        browser.resize(*browsers.PHONE)
        browser.open(url)
        assert browsers.serious(browsers.axe(browser.driver)) == [], f"{page} at phone width"
        browser.screenshot(folder / f"{prefix}-{page}-phone.png")
    browser.resize(*browsers.DESKTOP)
    return seen
