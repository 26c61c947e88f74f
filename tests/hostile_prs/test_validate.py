"""``fleetctl validate`` rejects every hostile pull request of the corpus, precisely.

For each PR: exit 1, and the set of errors (rule, file, line) is exactly the one the
corpus expects, each message containing the expected text — no PR slips through, and
none is rejected for an unrelated reason. Runs the CLI in-process (``cli.run``) to keep
40+ runs inside a few seconds each on a loaded machine; ``test_cli_exit_code`` runs the
real ``fleetctl`` process once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fleetctl import cli
from tests.hostile_prs.corpus import PullRequest, pull_requests
from tests.manifests.repos import ROOT

PRS = pull_requests()
RULE_GROUPS = {
    "escalation": {
        "team-cluster-scoped",
        "team-kind",
        "team-namespace",
        "team-admin-access",
        "reserved-namespace",
        "team-device-class",
        "unknown-kind",
        "team-folder",
    },
    "selectors and CEL": {
        "claim-unsatisfiable",
        "cel-removed-attribute",
        "cel-unknown-attribute",
        "cel-runtime-error",
        "cel",
        "cel-too-long",
    },
    "quota": {"team-quota"},
    "YAML and files": {
        "yaml-limit",
        "file-too-large",
        "path-escape",
        "yaml-duplicate-key",
        "yaml-syntax",
        "yaml-encoding",
        "yaml-ambiguous",
    },
    "duplicates": {"duplicate-object"},
    "names, fields and versions": {"dns-label", "schema", "unknown-kind", "deprecated-api"},
    "overlays": {"overlay-patch", "overlay-target"},
}


def test_corpus_covers_the_issue() -> None:
    assert len(PRS) >= 40
    assert all(pr.expected and pr.subject and pr.changed for pr in PRS), [pr.name for pr in PRS if not pr.expected]
    rules = {e.rule for pr in PRS for e in pr.expected}
    for group, members in RULE_GROUPS.items():
        assert rules & members, f"no PR in the corpus exercises {group}"


def _errors(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, set[tuple[str, str, int]], dict[tuple[str, str, int], str]]:
    capsys.readouterr()
    code = cli.run(["validate", str(repo), "-o", "json"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    messages: dict[tuple[str, str, int], str] = {}
    for f in findings:
        if f["severity"] == "error":
            file = str(Path(f["file"]).relative_to(repo)) if Path(f["file"]).is_absolute() else f["file"]
            messages.setdefault((f["rule"], file, f["line"]), f["message"])
    return code, set(messages), messages


@pytest.mark.parametrize("pr", PRS, ids=[pr.name for pr in PRS])
def test_validate_rejects_with_a_precise_finding(
    pr: PullRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = pr.checkout(into=tmp_path)
    code, errors, messages = _errors(repo, capsys)
    assert code == 1, f"{pr.name}: {pr.subject} was accepted"
    assert errors == {(e.rule, e.file, e.line) for e in pr.expected}, pr.subject
    for e in pr.expected:
        assert e.message in messages[(e.rule, e.file, e.line)]


def test_cli_exit_code(tmp_path: Path) -> None:
    pr = next(p for p in PRS if p.name == "clusterrole")
    repo = pr.checkout(into=tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "fleetctl", "validate", str(repo)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
        env={"NO_COLOR": "1", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1, result.stderr
    assert "teams/ml-research/clusterrole.yaml:1" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
