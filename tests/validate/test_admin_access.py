"""``adminAccess: true`` is an error unless the Team allows it; then fleet labels its namespaces.

The API server refuses a request with ``adminAccess: true`` in a namespace without
``resource.kubernetes.io/admin-access: "true"``; the sandbox test shows that the
label fleet's plan sets is exactly what makes it accept the same template.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.engine import renders
from fleet.manifests import Limits, kinds, read_tree
from fleet.policy import check
from tests.manifests.repos import EXAMPLE, load

TEMPLATE = EXAMPLE / "teams" / "inference" / "single-gpu.yaml"


def read_tree_of(repo: Path) -> dict[str, bytes]:
    files, problems = read_tree(repo, limits=Limits())
    assert not problems
    return files


def with_admin_access(text: str) -> str:
    return text.replace(
        "            deviceClassName: gpu.nvidia.com\n",
        "            deviceClassName: gpu.nvidia.com\n            adminAccess: true\n",
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    shutil.copytree(EXAMPLE, target)
    single = target / "teams" / "inference" / "single-gpu.yaml"
    single.write_text(with_admin_access(single.read_text()))
    return target


def allow(repo: Path) -> None:
    team = repo / "teams" / "inference" / "team.yaml"
    team.write_text(team.read_text() + "  adminAccess: true\n")


def test_admin_access_without_the_teams_permission_is_an_error_at_its_line(repo: Path) -> None:
    found = [f for f in check(load(read_tree_of(repo))) if f.rule == "team-admin-access"]
    assert len(found) == 1, found
    finding = found[0]
    assert (finding.location.file, finding.location.line, finding.location.col) == (
        "teams/inference/single-gpu.yaml",
        14,
        13,
    )
    assert "resource.kubernetes.io/admin-access" in finding.message
    assert "adminAccess: true in teams/inference/team.yaml" in finding.hint


def test_a_team_that_allows_admin_access_gets_labelled_namespaces(repo: Path) -> None:
    allow(repo)
    revision = load(read_tree_of(repo))
    assert not [f for f in check(revision) if f.severity == "error"]
    team = next(m.model for m in revision.manifests if isinstance(m.model, kinds.Team) and m.name == "inference")
    assert isinstance(team, kinds.Team)
    namespaces = [o for o in renders.team_objects(team) if o["kind"] == "Namespace"]
    assert [n["metadata"]["labels"][kinds.ADMIN_ACCESS_LABEL] for n in namespaces] == ["true", "true"]


def test_teams_without_admin_access_get_no_label() -> None:
    revision = load(read_tree_of(EXAMPLE))
    teams = [m.model for m in revision.manifests if isinstance(m.model, kinds.Team)]
    namespaces = [o for team in teams for o in renders.team_objects(team) if o["kind"] == "Namespace"]
    assert len(namespaces) >= len(teams) >= 2, "the example's teams and their namespaces"
    labelled = [
        n["metadata"]["name"] for n in namespaces if kinds.ADMIN_ACCESS_LABEL in n["metadata"].get("labels", {})
    ]
    assert labelled == []


def _template(namespace: str) -> str:
    body: dict[str, Any] = yaml.safe_load(with_admin_access(TEMPLATE.read_text()))
    body["metadata"]["namespace"] = namespace
    return json.dumps(body)


@pytest.mark.sandbox
def test_the_api_server_agrees(kubectl: Callable[..., Any], namespace: str, repo: Path) -> None:
    """Refused in an unlabelled namespace (validate: error); accepted once labelled as fleet's plan labels it."""
    refused = kubectl("create", "-f", "-", stdin=_template(namespace), check=False)
    assert refused.returncode != 0
    assert "admin-access" in refused.stderr, refused.stderr

    allow(repo)
    revision = load(read_tree_of(repo))
    team = next(m.model for m in revision.manifests if isinstance(m.model, kinds.Team) and m.name == "inference")
    assert isinstance(team, kinds.Team)
    planned = next(o for o in renders.team_objects(team) if o["kind"] == "Namespace")
    for key, value in planned["metadata"]["labels"].items():
        kubectl("label", "namespace", namespace, f"{key}={value}", "--overwrite")
    accepted = kubectl("create", "-f", "-", stdin=_template(namespace), check=False)
    assert accepted.returncode == 0, accepted.stderr
