"""``fleetctl console`` on a laptop: every kubeconfig context, read with its own credentials, in Chromium.

The real command runs against the sandbox (its kubeconfig has the admin's context and alice's and
bob's, who have no rights until bound). The URL it prints opens the session; pages show what
kubectl shows; a page follows the cluster without a reload; a context without rights is a page
that says so; Ctrl-C ends it with 130.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from fleet.engine.ownership import TEAM_LABEL
from fleet.sandbox import Sandbox, credentials
from tests import browsers
from tests.conftest import Kubectl, gpu_pod
from tests.console import walks
from tests.waits import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.sandbox]


@dataclass
class Console:
    url: str
    """The URL it printed, with its key."""
    base: str
    proc: subprocess.Popen[str]


def start(sandbox: Sandbox, *args: str) -> Console:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetctl", "console", "--kubeconfig", str(sandbox.kubeconfig), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("open http://127.0.0.1:"), line + (proc.stderr.read() if proc.poll() is not None else "")
    url = line.split()[1]
    return Console(url=url, base=url.split("/?")[0], proc=proc)


def stop(console: Console) -> tuple[int, str]:
    console.proc.send_signal(signal.SIGINT)
    _, err = console.proc.communicate(timeout=30)
    return console.proc.returncode, err


@pytest.fixture()
def team_namespace(namespace: str, kubectl: Kubectl) -> Iterator[str]:
    """The test's namespace, labelled as a fleet team's (``console-team``)."""
    kubectl("label", "namespace", namespace, f"{TEAM_LABEL}=console-team")
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(template))
    yield namespace


def test_every_context_is_a_cluster_and_pages_show_what_kubectl_shows(
    sandbox: Sandbox, kubectl: Kubectl, team_namespace: str, browser: browsers.Browser, tmp_path: Path
) -> None:
    gpu_pod(kubectl, team_namespace, name="trainer", template="one-gpu")
    kubectl("wait", "--for=condition=Ready", "pod/trainer", "-n", team_namespace, "--timeout=120s")
    console = start(sandbox)
    try:
        browser.open(console.url)
        assert browser.driver.current_url == f"{console.base}/", "the key leaves the address bar"
        fleet = walks.text(browser)
        for context in (credentials.CLUSTER, "alice@fleet-sandbox", "bob@fleet-sandbox"):
            assert context in fleet
        assert "no FleetSync" in fleet, "no controller runs in the sandbox: the row says so"
        claims = json.loads(kubectl("get", "resourceclaims", "-n", team_namespace, "-o", "json").stdout)["items"]
        (claim,) = [c for c in claims if (c.get("status") or {}).get("allocation")]
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        seen = walks.walk(
            browser, console.base, cluster=credentials.CLUSTER, team="console-team", node=result["pool"],
            folder=walks.shots(tmp_path), prefix="fleetctl-console",
        )  # fmt: skip
        assert f"{team_namespace}/{claim['metadata']['name']}" in seen["node"]
        assert "trainer" in seen["node"] and "console-team" in seen["node"]
        with httpx.Client(cookies=cookies(browser)) as http:
            gpus = http.get(f"{console.base}/clusters/{credentials.CLUSTER}/gpus?o=json").json()
        (device,) = [d for d in gpus["devices"] if d["claim"] == f"{team_namespace}/{claim['metadata']['name']}"]
        assert (device["pool"], device["name"]) == (result["pool"], result["device"])
        assert "one-gpu" in seen["team"]
        # live: a second pod shows without a reload
        browser.open(f"{console.base}/clusters/{credentials.CLUSTER}/teams/console-team")
        assert "Devices allocated: 1." in walks.text(browser)
        browser.driver.execute_script("window.stillThisPage = true")
        gpu_pod(kubectl, team_namespace, name="second", template="one-gpu")
        wait_for(lambda: "Devices allocated: 2." in walks.text(browser), what="the team page to count the new pod")
        assert browser.driver.execute_script("return window.stillThisPage === true"), "the page was reloaded"
    finally:
        code, err = stop(console)
    assert code == 130 and "Traceback" not in err, err


def cookies(browser: browsers.Browser) -> dict[str, str]:
    return {c["name"]: c["value"] for c in browser.driver.get_cookies()}


def test_a_context_without_rights_is_a_page_that_says_so(sandbox: Sandbox, browser: browsers.Browser) -> None:
    console = start(sandbox, "--context", "alice@fleet-sandbox")
    try:
        browser.open(console.url)
        assert "you may not see any cluster of this fleet" in walks.text(browser)
        browser.open(f"{console.base}/clusters/alice@fleet-sandbox/gpus")
        page = walks.text(browser)
        assert "Not allowed" in page and "you may not list the GPUs (resourceslices)" in page
        assert "fleet-console-viewer" in page, "the hint says what to ask for"
        assert browsers.serious(browsers.axe(browser.driver)) == []
        with httpx.Client(cookies=cookies(browser)) as http:
            answer = http.get(f"{console.base}/clusters/alice@fleet-sandbox/gpus")
        assert answer.status_code == 403
        wrong = httpx.get(f"{console.base}/?key=guessed")
        assert wrong.status_code == 401 and "fleetctl console printed" in wrong.text
    finally:
        stop(console)


def test_an_unknown_context_is_refused_before_serving(sandbox: Sandbox) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fleetctl", "console", "--kubeconfig", str(sandbox.kubeconfig), "--context", "nope"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "no context 'nope' in the kubeconfig" in done.stderr
    assert "alice@fleet-sandbox" in done.stderr and "Traceback" not in done.stderr
