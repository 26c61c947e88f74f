"""A real Prometheus (Debian's) scrapes a real ``fleet-controller`` through the demo's flow.

The controller is the real process (``tests.controller.replicas``) against the sandbox,
following a real git remote, with webhooks and commit statuses on (the git host's API is the
loopback ``tests.hosts.apis.StatusAPI``). Prometheus scrapes it every second from the start,
with ``overlays/monitoring/fleet.rules.yaml`` loaded. The flow is the demo's: a commit is
applied; a second one, announced by a signed webhook, too; someone edits an object fleet
manages and fleet repairs it; the remote goes away for a moment (a fetch fails) and comes
back; a bad commit is rejected. Then:

- every query of every panel of ``overlays/monitoring/fleet-dashboard.json`` returns data
  from Prometheus's HTTP API;
- Prometheus evaluates every rule without error, and the alerts the final state calls for
  (Stalled, not Ready) are pending for the cluster, with the labels the real scrape gives;
- ``promtool check metrics`` accepts the controller's ``/metrics``, which holds every metric a
  rule or a panel names.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.sandbox import Sandbox
from fleet.sandbox.processes import free_port
from tests.apply.repos import Repo
from tests.controller.conftest import CRD, Remote
from tests.controller.replicas import Replicas, ready_at
from tests.hosts.apis import StatusAPI
from tests.monitoring import prometheus
from tests.monitoring.prometheus import DASHBOARD, RULES, api, check_metrics, query
from tests.waits import established, wait_for

pytestmark = pytest.mark.sandbox

SECRET = "observe-webhook-secret"


@dataclass(frozen=True)
class Observed:
    metrics_url: str
    prometheus_url: str
    cluster: str
    bad: str


def fleetsync(sandbox: Sandbox, cluster: str) -> dict[str, Any]:
    out = sandbox.kubectl("get", "fleetsync", cluster, "-o", "json", check=False)
    return dict(json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}


def condition(status: dict[str, Any], kind: str) -> str:
    return next((str(c["status"]) for c in status.get("conditions") or () if c["type"] == kind), "")


def push_hook(port: int, revision: str, message: str) -> None:
    """A push to main, as GitHub signs it (the controller fetches at once). Equal bodies are refused
    as replays, so each push names its head commit's message."""
    payload = {"ref": "refs/heads/main", "after": revision, "head_commit": {"id": revision, "message": message}}
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
    }
    request = urllib.request.Request(f"http://127.0.0.1:{port}/webhook", data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.loads(response.read())["result"] == "accepted"


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


@pytest.fixture(scope="module")
def observed(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    sandbox.kubectl("apply", "-f", str(CRD))
    established(sandbox.kubectl, "fleetsyncs.fleet.gpufleet.dev")
    root = tmp_path_factory.mktemp("observed")
    remote = Remote(root / "git")
    repo = Repo(root=root / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    first = remote.push(repo, message="a team")
    (root / "webhook-secret").write_text(SECRET + "\n")
    (root / "status-token").write_text("status-token-0123456789\n")
    port = free_port()
    replicas = Replicas(sandbox, remote, repo.cluster, root)
    api_double = StatusAPI()
    with (
        api_double.serving() as host,
        prometheus.running(directory=root, targets=[f"127.0.0.1:{port}"], rule_files=[RULES]) as prometheus_url,
    ):
        try:
            replicas.start(
                "observed",
                "--no-leader-elect",
                f"--listen=127.0.0.1:{port}",
                "--interval=1h",  # webhooks announce every change below
                "--resync=1h",
                f"--webhook-secret-file={root / 'webhook-secret'}",
                f"--commit-status-token-file={root / 'status-token'}",
                "--commit-status-provider=gitea",
                f"--commit-status-api-url={host}/api/v1",
                "--commit-status-repository=org/fleet",
            )
            log = f"(the controller's log: {root / 'observed.log'})"
            wait_for(lambda: ready_at(sandbox, repo.cluster, first), within=120, what=f"Ready at {first} {log}")
            # Prometheus has the state before the flow, so what the flow counts shows as increases.
            ready = f'fleet_ready{{cluster="{repo.cluster}"}} == 1'
            wait_for(lambda: query(prometheus_url, ready), within=30, what=f"Prometheus scraped {ready}")

            # A team's change, merged and announced by the git host's webhook.
            repo.claim_template("ml", "single-gpu")
            second = remote.push(repo, message="ml: a claim template")
            push_hook(port, second, "ml: a claim template")
            wait_for(lambda: ready_at(sandbox, repo.cluster, second), within=60, what=f"Ready at {second} {log}")

            # Someone edits what fleet manages: fleet takes it back (drift policy enforce).
            patch = json.dumps({"spec": {"selectors": [{"cel": {"expression": "device.driver == 'drifted'"}}]}})
            sandbox.kubectl("patch", "deviceclass", repo.device_class_name, "--type=merge", "-p", patch)
            wait_for(
                lambda: "fleet_drift_repaired_total{" in scrape(f"http://127.0.0.1:{port}/metrics"),
                within=60,
                what=f"the DeviceClass repaired {log}",
            )

            # The remote goes away for a moment: the fetch fails, then works again.
            moved = remote.bare.with_name("moved.git")
            remote.bare.rename(moved)
            push_hook(port, second, "announced while the remote is away")
            wait_for(
                lambda: fleetsync(sandbox, repo.cluster).get("sourceReachable") is False,
                within=60,
                what=f"sourceReachable false {log}",
            )
            moved.rename(remote.bare)
            push_hook(port, second, "announced when it is back")
            wait_for(
                lambda: fleetsync(sandbox, repo.cluster).get("sourceReachable") is True,
                within=60,
                what=f"sourceReachable true again {log}",
            )

            # A bad commit is rejected; the last good revision stays enforced.
            def break_team(work: Path) -> None:
                team = work / "teams" / "ml" / "team.yaml"
                team.write_text(team.read_text().replace("spec:\n", "spec:\n  bogus: true\n", 1))

            bad = remote.push(repo, message="bad: unknown field", edit=break_team)
            push_hook(port, bad, "bad: unknown field")
            wait_for(
                lambda: condition(fleetsync(sandbox, repo.cluster), "Stalled") == "True",
                within=60,
                what=f"Stalled at {bad} {log}",
            )
            yield Observed(
                metrics_url=f"http://127.0.0.1:{port}/metrics",
                prometheus_url=prometheus_url,
                cluster=repo.cluster,
                bad=bad,
            )
        finally:
            replicas.stop()


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every target of every panel."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(p["title"], t["expr"]) for p in panels for t in p.get("targets") or ()]


def test_every_dashboard_panel_has_data_after_the_demo_flow(observed: Observed) -> None:
    queries = panel_queries()
    assert len({title for title, _ in queries}) == len(json.loads(DASHBOARD.read_text())["panels"])
    for title, expr in queries:
        # The last changes reach Prometheus with its next scrape and rule evaluation: poll.
        wait_for(
            lambda expr=expr: any(not math.isnan(float(s["value"][1])) for s in query(observed.prometheus_url, expr)),
            within=30,
            what=f"panel {title!r}: {expr} returns a number",
            details=lambda expr=expr: str(query(observed.prometheus_url, expr)),
        )


def test_the_status_gauges_say_what_the_fleetsync_says(observed: Observed, sandbox: Sandbox) -> None:
    status = fleetsync(sandbox, observed.cluster)
    assert status["lastAttemptedRevision"] == observed.bad and status["sourceReachable"] is True
    assert condition(status, "Stalled") == "True" and condition(status, "Ready") == "False"
    for name, value in (("fleet_ready", 0.0), ("fleet_stalled", 1.0), ("fleet_source_reachable", 1.0)):
        expr = f'{name}{{cluster="{observed.cluster}"}}'

        def current(expr: str = expr) -> list[float]:
            return [float(s["value"][1]) for s in query(observed.prometheus_url, expr)]

        wait_for(lambda current=current, value=value: current() == [value], within=30, what=f"{expr} == {value}")


def test_prometheus_evaluates_every_rule_and_the_stalled_revision_sets_off_its_alerts(observed: Observed) -> None:
    def rules() -> list[dict[str, Any]]:
        return [r for g in api(observed.prometheus_url, "rules")["groups"] for r in g["rules"]]

    written = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    assert {r["name"] for r in rules()} == written and len(written) == 8
    # Evaluated at least once after the flow began (a rule not evaluated yet has health "unknown").
    wait_for(lambda: all(r["health"] != "unknown" for r in rules()), within=30, what="every rule evaluated")
    for rule in rules():
        assert rule["health"] == "ok" and not rule.get("lastError"), rule

    def active() -> set[str]:
        return {
            a["labels"]["alertname"]
            for a in api(observed.prometheus_url, "alerts")["alerts"]
            if a["labels"].get("cluster") == observed.cluster and a["labels"].get("job") == "fleet"
        }

    # Both wait out their `for:` (1 and 10 minutes), so they are pending, not firing, here.
    wait_for(lambda: active() >= {"FleetSyncStalled", "FleetSyncNotReady"}, within=30, what="both alerts pending")


def test_promtool_accepts_the_controllers_metrics(observed: Observed) -> None:
    text = scrape(observed.metrics_url)
    for family in ("fleet_ready", "fleet_stalled", "fleet_source_reachable", "fleet_build_info",
                   "fleet_helm_remediations_total", "fleet_drift_repaired_total", "fleet_git_fetch_errors_total",
                   "fleet_commit_status_posts_total", "fleet_webhook_requests_total"):  # fmt: skip
        assert f"\n{family}{{" in text or f"\n{family} " in text, family
    assert check_metrics(text) == ""


def test_every_metric_the_rules_and_panels_name_is_exported(observed: Observed) -> None:
    exprs = [r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    exprs += [expr for _, expr in panel_queries()]
    named = {name for expr in exprs for name in re.findall(r"\bfleet_[a-z_]+", expr)}
    lines = scrape(observed.metrics_url).splitlines()
    exported = {line.split("{")[0].split(" ")[0] for line in lines}
    exported |= {line.split()[2] for line in lines if line.startswith("# TYPE ")}  # declared, no series yet
    assert len(named) >= 15
    assert named <= exported, sorted(named - exported)
