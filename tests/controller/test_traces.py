"""The controller's traces in a real backend: Jaeger (built from its Go module) receives its OTLP.

A real ``fleet-controller`` process follows a git remote with only the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` set. The trace that FleetSync ``status.traceID`` names is
looked up in Jaeger's query API and must tell what happened to the commit: the ``git fetch``
that found it at the root, then ``reconcile``, ``validate``, ``render``, each stage, each
written object with its cluster, revision, stage, kind, namespace and name, and each helm
run of the operator stage. A drift repair is a trace of its own, linked to the revision's,
and leaves status naming the revision's trace. The trace of a refused commit, and of one that
fails to apply, has error status.

With the collector down, the controller applies commits as before and says so once.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.engine import stages
from fleet.helm.releases import COMMAND
from fleet.sandbox import Sandbox, jaegers, processes
from fleet.sandbox.operators import StandInOperator
from fleet.telemetry import tracing
from tests.apply.repos import Repo
from tests.conftest import NAMESPACE, RELEASE
from tests.controller.conftest import Remote
from tests.controller.replicas import Replicas, ready_at, replicas
from tests.controller.test_loop import managed_versions
from tests.operator.conftest import UPSTREAM
from tests.operator.repos import OperatorRepo
from tests.waits import wait_for

__all__ = ["replicas"]  # the fixture

pytestmark = [pytest.mark.sandbox, pytest.mark.extras("jaeger"), pytest.mark.usefixtures("fleetsync_crd")]

OBJECT_TAGS = (tracing.CLUSTER, tracing.REVISION, tracing.STAGE, tracing.KIND, tracing.NAMESPACE, tracing.NAME)


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[jaegers.Jaeger]:
    with jaegers.serve(tmp_path_factory.mktemp("jaeger")) as running:
        yield running


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.load(response)
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return {}
        raise


def trace_spans(jaeger: jaegers.Jaeger, trace_id: str) -> list[dict[str, Any]]:
    """The spans Jaeger holds for ``trace_id`` (v1 query API), [] while it knows none."""
    data = _get(f"{jaeger.query_url}/api/traces/{trace_id}").get("data") or []
    return list(data[0]["spans"]) if data else []


def traces_of(jaeger: jaegers.Jaeger, service: str, operation: str) -> list[list[dict[str, Any]]]:
    query = urllib.parse.urlencode({"service": service, "operation": operation, "limit": 200, "lookback": "1h"})
    return [t["spans"] for t in _get(f"{jaeger.query_url}/api/traces?{query}").get("data") or []]


def tags(span: dict[str, Any]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in span["tags"]}


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["operationName"] == name]


def parent_of(span: dict[str, Any]) -> str:
    return next((r["spanID"] for r in span["references"] if r["refType"] == "CHILD_OF"), "")


def status(sandbox: Sandbox, cluster: str) -> dict[str, Any]:
    out = sandbox.kubectl("get", "fleetsync", cluster, "-o", "json", check=False)
    return dict(json.loads(out.stdout).get("status") or {}) if out.returncode == 0 else {}


def otel(endpoint: str, service: str) -> dict[str, str]:
    """The controller's tracing settings: the endpoint alone turns OTLP on; batches every 200 ms."""
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": service, "OTEL_BSP_SCHEDULE_DELAY": "200"}


def break_team(work: Path) -> None:
    team = work / "teams" / "ml" / "team.yaml"
    team.write_text(team.read_text().replace("spec:\n", "spec:\n  bogus: true\n", 1))


@pytest.mark.usefixtures("cleanup_release")
def test_a_revision_is_one_trace_in_jaeger_from_its_fetch_to_each_object_and_helm_run(
    sandbox: Sandbox,
    remote: Remote,
    replicas: Replicas,
    jaeger: jaegers.Jaeger,
    chart_repo: str,
    helm_binary: Path,
    tmp_path: Path,
) -> None:
    repo = OperatorRepo(root=tmp_path / "unused", id=replicas.cluster.removeprefix("t-"), chart_repo=chart_repo)
    repo.team("ml", namespaces=["ml"], group="ml")
    repo.claim_template("ml", "single-gpu")
    cluster = repo.cluster
    service = f"fleet-controller-{cluster}"
    first = remote.push(repo, message="the GPU Operator and a team")
    with StandInOperator(sandbox, upstream=UPSTREAM):
        replicas.start(
            "a", "--helm", str(helm_binary), "--health-timeout", "120s", otel=otel(jaeger.otlp_endpoint, service)
        )
        wait_for(lambda: ready_at(sandbox, cluster, first), within=300, what=f"Ready at {first}")
        trace_id = status(sandbox, cluster)["traceID"]
        assert len(trace_id) == 32, trace_id
        written = {tuple(key.split("/", 2)) for key in managed_versions(sandbox, cluster)}
        written.add(("HelmRelease", NAMESPACE, RELEASE))

        def missing() -> list[str]:
            spans = trace_spans(jaeger, trace_id)
            found = {s["operationName"] for s in spans}
            gone = [n for n in ("git fetch", "reconcile", "validate", "render") if n not in found]
            staged = {tags(s).get(tracing.STAGE) for s in named(spans, "apply stage")}
            gone += [f"apply stage {s.name}" for s in stages.STAGES if s.name not in staged]
            objects = {
                (t[tracing.KIND], t[tracing.NAMESPACE], t[tracing.NAME])
                for t in map(tags, named(spans, "apply object"))
            }
            gone += sorted(f"apply object {'/'.join(o)}" for o in written - objects)
            helm = {tags(s).get(COMMAND) for s in named(spans, "run helm")}
            gone += [] if "upgrade" in helm else ["run helm upgrade"]
            return gone

        wait_for(lambda: not missing(), within=60, what=f"the revision's spans in Jaeger: {missing()}")
        spans = trace_spans(jaeger, trace_id)
        by_id = {s["spanID"]: s for s in spans}

        roots = [s for s in spans if not s["references"]]
        assert [r["operationName"] for r in roots] == ["git fetch"], "one root: the fetch that found the commit"
        assert tags(roots[0])[tracing.REVISION] == first
        reconciles = named(spans, "reconcile")
        assert reconciles and all(parent_of(r) == roots[0]["spanID"] for r in reconciles)
        assert tags(named(spans, "validate")[0])[tracing.REVISION] == first
        for span in named(spans, "validate") + named(spans, "apply stage"):
            assert by_id[parent_of(span)]["operationName"] == "reconcile", span["operationName"]
        for span in named(spans, "render"):  # the controller's LoadCache renders inside validate
            assert by_id[parent_of(span)]["operationName"] == "validate", span["operationName"]

        for span in named(spans, "apply object"):
            got = tags(span)
            assert all(key in got for key in OBJECT_TAGS), (span["operationName"], got)
            assert (got[tracing.CLUSTER], got[tracing.REVISION]) == (cluster, first), got
            kind = got[tracing.KIND]
            assert got[tracing.STAGE] == ("operator" if kind == "HelmRelease" else stages.stage_of(kind).name), got
        upgrades = [s for s in named(spans, "run helm") if tags(s)[COMMAND] == "upgrade"]
        assert all(tags(s)[tracing.STAGE] == "operator" for s in upgrades)
        assert all(tags(s)[tracing.CLUSTER] == cluster for s in named(spans, "run helm"))
        assert not [s for s in spans if tags(s).get("otel.status_code") == "ERROR"], "nothing failed"

        # Drift: a reconcile that is not about a new revision is a trace of its own, linked to it.
        ns = repo.ns("ml")
        sandbox.kubectl("delete", "resourceclaimtemplate", "single-gpu", "-n", ns)
        wait_for(
            lambda: any(d.get("name") == "single-gpu" for d in status(sandbox, cluster).get("drift") or ()),
            within=60,
            what="the repair in status.drift",
        )

        def repair() -> list[dict[str, Any]]:
            for spans in traces_of(jaeger, service, "reconcile"):
                created = [tags(s) for s in named(spans, "apply object")]
                recreated = any(t[tracing.NAME] == "single-gpu" and t[tracing.ACTION] == "created" for t in created)
                if recreated and spans[0]["traceID"] != trace_id:
                    return spans
            return []

        wait_for(lambda: bool(repair()), within=60, what="the repair's trace in Jaeger")
        spans = repair()
        root = next(s for s in spans if s["operationName"] == "reconcile" and not parent_of(s))
        assert {(r["refType"], r["traceID"]) for r in root["references"]} == {("FOLLOWS_FROM", trace_id)}
        assert status(sandbox, cluster)["traceID"] == trace_id, "a repair does not replace the revision's trace"

        # A refused commit: its own trace, named by status, with error status.
        bad = remote.push(repo, message="bad: unknown field", edit=break_team)
        wait_for(lambda: status(sandbox, cluster).get("lastAttemptedRevision") == bad, within=60, what="attempted")
        wait_for(lambda: status(sandbox, cluster).get("traceID") != trace_id, within=30, what="the refusal's trace")
        bad_trace = status(sandbox, cluster)["traceID"]
        wait_for(
            lambda: (
                {"git fetch", "reconcile", "validate"} <= {s["operationName"] for s in trace_spans(jaeger, bad_trace)}
            ),
            within=60,
            what="the refused revision's spans in Jaeger",
        )
        spans = trace_spans(jaeger, bad_trace)
        assert tags(next(s for s in spans if not s["references"]))[tracing.REVISION] == bad
        for name in ("reconcile", "validate"):
            got = tags(named(spans, name)[0])
            assert (got.get("otel.status_code"), got.get("error")) == ("ERROR", True), (name, got)
        assert "teams/ml/team.yaml" in tags(named(spans, "reconcile")[0])["otel.status_description"]

        # A commit that fails to apply (a chart version the repository lacks): error status, with the error.
        repo.version = "v99.0.0"
        broken = remote.push(repo, message="an operator version the chart repository does not have")
        wait_for(
            lambda: (
                status(sandbox, cluster).get("lastAttemptedRevision") == broken
                and "cannot read chart" in status(sandbox, cluster).get("lastError", "")
            ),
            within=120,
            what="the failed apply in status",
        )
        failed_trace = status(sandbox, cluster)["traceID"]
        assert failed_trace not in (trace_id, bad_trace)

        def failed() -> list[dict[str, Any]]:
            spans = named(trace_spans(jaeger, failed_trace), "reconcile")
            return [s for s in spans if tags(s).get("otel.status_code") == "ERROR"]

        wait_for(lambda: bool(failed()), within=60, what="the failed reconcile in Jaeger")
        assert "cannot read chart" in tags(failed()[0])["otel.status_description"]


def test_with_the_collector_down_the_controller_goes_on_and_says_so_once(
    sandbox: Sandbox, remote: Remote, replicas: Replicas, tmp_path: Path
) -> None:
    repo = Repo(root=tmp_path / "unused", id=replicas.cluster.removeprefix("t-"))
    repo.team("ml", namespaces=["ml"], group="ml")
    cluster = repo.cluster
    down = f"http://127.0.0.1:{processes.free_port()}"  # nothing listens there
    first = remote.push(repo, message="a team")
    proc = replicas.start("a", otel={**otel(down, "fleet-controller"), "OTEL_EXPORTER_OTLP_TIMEOUT": "2"})
    wait_for(lambda: ready_at(sandbox, cluster, first), within=120, what=f"Ready at {first}")
    repo.claim_template("ml", "single-gpu")
    second = remote.push(repo, message="a claim template")
    wait_for(lambda: ready_at(sandbox, cluster, second), within=120, what=f"Ready at {second}")
    wait_for(lambda: "traces: cannot export spans" in replicas.log("a", tail=10**7), within=30, what="the warning")

    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=25) == 0, "SIGTERM ends it within the grace period, spans queued or not"
    log = replicas.log("a", tail=10**7)
    lines = log.splitlines()
    assert len([line for line in lines if "traces: cannot export spans" in line]) == 1, log[-3000:]
    assert f"{down}/v1/traces" in next(line for line in lines if "traces: cannot export spans" in line)
    for noise in ("Transient error", "Failed to export", "Queue full", "Traceback"):
        assert noise not in log, noise
