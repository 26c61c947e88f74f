"""fleetctl diff → apply → diff (exit 1, 0, 0 as kubectl diff), and the trace of a run in stage order."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fleet.engine import STAGES
from fleet.sandbox import Sandbox
from fleet.telemetry import tracing
from fleetctl import cli
from tests.apply.conftest import Engine
from tests.apply.repos import Repo

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="session")
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.setup(exporter="none", extra=exporter)  # the global provider can be set once per process
    yield exporter


def test_diff_apply_diff_exit_codes(
    sandbox: Sandbox, repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one-gpu")
    path = str(repo.write())
    assert cli.run(["diff", path, "--cluster", repo.cluster]) == 1
    out = capsys.readouterr().out
    # More than a handful of objects: one line per created object, by stage, not their bodies.
    assert re.search(rf"^  \+ ResourceClaimTemplate {repo.ns('ml')}/one-gpu +write as ", out, re.MULTILINE), out
    assert "+++ merged" not in out and len(out.splitlines()) < 20, out
    assert "\x1b[" not in out, "no colour when NO_COLOR is set or output is not a terminal"
    assert cli.run(["diff", path, "--cluster", repo.cluster, "--full"]) == 1
    assert f"+++ merged resource.k8s.io/v1/ResourceClaimTemplate {repo.ns('ml')}/one-gpu" in capsys.readouterr().out
    assert cli.run(["apply", path, "--cluster", repo.cluster]) == 0
    capsys.readouterr()
    assert cli.run(["diff", path, "--cluster", repo.cluster]) == 0
    assert capsys.readouterr().out.strip() == ""


def test_a_later_run_of_unchanged_content_takes_the_plan_from_disk(
    sandbox: Sandbox,
    repo: Repo,
    spans: InMemorySpanExporter,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """diff, apply and diff again in three processes' stead: the first plans and stores the plan, the
    others take it back (the "validate" span says from where); an edit is planned afresh."""
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one-gpu")
    path = str(repo.write())
    cache = ["--cache-dir", str(tmp_path / "cache")]

    def run(*args: str) -> tuple[int, str | None, str]:
        spans.clear()
        code = cli.run([*args, path, "--cluster", repo.cluster, *cache])
        (validate,) = [s for s in spans.get_finished_spans() if s.name == "validate"]
        return code, (validate.attributes or {}).get("fleet.cached"), capsys.readouterr().out  # type: ignore[return-value]

    code, cached, first = run("diff")
    assert (code, cached) == (1, None)
    assert [p.suffix for p in (tmp_path / "cache" / "plans").iterdir()] == [".plan"]
    assert run("diff")[1:] == ("disk", first), "the same diff from the stored plan"
    assert run("apply")[:2] == (0, "disk")
    assert run("diff")[:2] == (0, "disk")
    repo.claim_template("ml", "one-gpu", count=2)
    repo.write()
    code, cached, out = run("diff")
    assert (code, cached) == (1, None)
    assert re.search(r"^\+\s+count: 2$", out, re.MULTILINE), out


def test_diff_of_an_unreachable_cluster_exits_2(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = repo.root.parent / "dead.kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n"
        "users:\n- name: u\n  user: {token: x}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\n"
        "current-context: c\n"
    )
    repo.team("ml", namespaces=["ml"], group="g")
    path = str(repo.write())
    assert cli.run(["diff", path, "--cluster", repo.cluster, "--kubeconfig", str(kubeconfig), "--timeout", "3"]) == 2
    assert "cannot reach the API server" in capsys.readouterr().err


def test_trace_shows_stages_in_order_with_object_attributes(
    fleet: Engine, repo: Repo, spans: InMemorySpanExporter
) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one-gpu")
    spans.clear()
    fleet.apply()
    finished = spans.get_finished_spans()
    stages = [s for s in finished if s.name == "apply stage"]
    assert [s.attributes[tracing.STAGE] for s in sorted(stages, key=lambda s: s.start_time)] == [s.name for s in STAGES]
    writes = [s for s in finished if s.name == "apply object"]
    template = next(s for s in writes if s.attributes[tracing.KIND] == "ResourceClaimTemplate")
    assert template.attributes[tracing.NAMESPACE] == repo.ns("ml")
    assert template.attributes[tracing.NAME] == "one-gpu"
    assert template.attributes[tracing.ACTION] == "created"
    claims_stage = next(s for s in stages if s.attributes[tracing.STAGE] == "claims")
    assert template.parent is not None and template.parent.span_id == claims_stage.context.span_id
    assert {"diff", "wait health"} <= {s.name for s in finished}


def test_a_repository_error_found_while_listing_is_a_plain_error(
    sandbox: Sandbox, repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validation runs beside the live listing: its error must not come out as a task group's ExceptionGroup."""
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    repo.team("ml", namespaces=["ml"], group="ml-research")
    path = str(repo.write())
    for command in ("diff", "apply"):
        assert cli.run([command, path, "--cluster", "no-such-cluster"]) == 2
        err = capsys.readouterr().err
        assert "error: no Cluster named 'no-such-cluster'" in err and "ExceptionGroup" not in err
