"""A GPU maintenance on the console's pages, in Debian's Chromium: the cluster page's section and the
node page's marks, read as a person reads them, checked by axe at both sizes.

The app is the one both front doors serve, given a fixed snapshot (``tests.console.snapshots``) whose
H100 node a GPUMaintenance takes whole at ``NoSchedule`` while two teams' pods run there; what the
figures are is tested in ``test_pages`` and against the sandbox in ``tests/controller``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from fleet.console import apps, logins
from tests import browsers
from tests.console import walks
from tests.console.snapshots import Fixed
from tests.console.test_pages import maintenance_snapshot
from tests.waits import wait_for

pytestmark = pytest.mark.browser


def test_the_cluster_page_shows_the_maintenance_and_the_node_page_marks_its_devices(
    browser: browsers.Browser, tmp_path: Path
) -> None:
    app, _ = apps.build(source=Fixed(maintenance_snapshot()), login=logins.LocalLogin(user="me", key="k"))
    folder = walks.shots(tmp_path)
    with browsers.serve(app) as base:
        browser.open(f"{base}/?key=k")
        seen = {}
        for page, url in (("cluster", "/clusters/gpu-east"), ("node", "/clusters/gpu-east/gpus/dgx-h100-01")):
            for size in (browsers.DESKTOP, browsers.PHONE):
                browser.resize(*size)
                browser.open(base + url)
                wait_for(lambda: browser.driver.find_elements(By.CSS_SELECTOR, "main h1"), what=f"{page} to render")
                assert browsers.serious(browsers.axe(browser.driver)) == [], f"{page} at {size}"
                browser.screenshot(folder / f"maintenance-{page}-{size[0]}.png")
            assert [e for e in browser.log() if e.get("level") == "SEVERE"] == [], page
            seen[page] = walks.text(browser)
    browser.resize(*browsers.DESKTOP)
    cluster = seen["cluster"]
    assert "GPU maintenances" in cluster and "Out of scheduling" in cluster
    assert "every device of node dgx-h100-01 (8)" in cluster and "HBM errors, RMA 4711" in cluster
    assert "inference/server (team inference)" in cluster and "ml-research/trainer (team ml-research)" in cluster
    assert "claims: 2 claims" in cluster
    node = seen["node"]
    assert "8 of 8 devices under GPU maintenance: repair." in node
    assert node.count("fleet.gpufleet.dev/maintenance=repair:NoSchedule") == 8
