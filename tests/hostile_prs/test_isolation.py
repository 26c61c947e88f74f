"""Isolation beyond validation: the API server refuses every escalation of the corpus by itself.

``fleetctl validate`` is the first wall; this is the second. The RBAC fleet gives a team
(``renders.team_objects``: Namespace, Role on claims and templates, RoleBinding to the
owners, ResourceQuota) is applied to fresh namespaces standing in for the example's
``ml-research`` and ``inference``. Then, with validation bypassed on purpose, every
object an escalation PR of the corpus adds (``Team:`` in its header) is sent to the
sandbox's real kube-apiserver with ``kubectl create --as/--as-group``: a user holding
exactly the team owners' group. Each one must be refused by the server (RBAC, the
admin-access namespace label, or the ResourceQuota), and an admin read afterwards must
find nothing created beyond what the quota admits.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.engine import renders
from fleet.manifests import kinds, read_revision
from fleet.manifests.views import resolve
from fleet.sandbox import Sandbox
from tests.conftest import Kubectl
from tests.hostile_prs.corpus import PullRequest, pull_requests
from tests.manifests.repos import EXAMPLE

ESCALATIONS = [pr for pr in pull_requests() if pr.team]
USER = "mallory"
QUOTA_REFUSAL = "exceeded quota"


@dataclass(frozen=True)
class Tenancy:
    """Fresh names for the example's teams in the sandbox."""

    prefix: str
    namespaces: dict[str, str]
    groups: dict[str, str]
    quota: dict[str, int]

    def rename(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The PR's object with its team namespaces and group names mapped; cluster-scoped names prefixed."""
        meta = obj.setdefault("metadata", {})
        if "namespace" in meta:
            meta["namespace"] = self.namespaces.get(meta["namespace"], meta["namespace"])
        else:
            meta["name"] = f"{self.prefix}-{meta.get('name', 'x')}"
        for subject in obj.get("subjects") or ():
            subject["name"] = self.groups.get(subject.get("name"), subject.get("name"))
        return obj


@pytest.fixture(scope="module")
def tenancy(sandbox: Sandbox, kubectl: Kubectl) -> Iterator[Tenancy]:
    prefix = f"h-{uuid.uuid4().hex[:6]}"
    view = resolve(read_revision(EXAMPLE), cluster="gpu-east")
    names = {
        ns: f"{prefix}-{ns}"
        for team in view.teams
        if isinstance(team.model, kinds.Team)
        for ns in team.model.spec.namespaces
    }
    groups: dict[str, str] = {}
    objects: list[dict[str, Any]] = []
    quota: dict[str, int] = {}
    for manifest in view.teams:
        team = manifest.model
        assert isinstance(team, kinds.Team)
        owners = [kinds.Owner(kind="Group", name=f"{prefix}-{o.name}") for o in team.spec.owners]
        groups.update({o.name: f"{prefix}-{o.name}" for o in team.spec.owners})
        spec = team.spec.model_copy(update={"namespaces": [names[n] for n in team.spec.namespaces], "owners": owners})
        objects += renders.team_objects(team.model_copy(update={"spec": spec}))
        if team.metadata.name == "ml-research":
            quota = dict(team.spec.quota)
    # inference's own template, which an escalation tries to overwrite
    single = yaml.safe_load((EXAMPLE / "teams/inference/single-gpu.yaml").read_text())
    single["metadata"]["namespace"] = names["inference"]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    kubectl("create", "-f", "-", stdin=json.dumps(single))
    try:
        yield Tenancy(prefix=prefix, namespaces=names, groups=groups, quota=quota)
    finally:
        kubectl("delete", "namespace", *names.values(), "--wait=true", "--timeout=120s", check=False)


def _as_team(tenancy: Tenancy, team: str) -> list[str]:
    group = {"ml-research": "ml-research-admins", "inference": "inference-oncall"}[team]
    return [f"--as={USER}", f"--as-group={tenancy.groups[group]}"]


def _documents(pr: PullRequest, repo: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in pr.changed:
        docs += [d for d in yaml.safe_load_all((repo / path).read_text()) if isinstance(d, dict) and "kind" in d]
    return docs


def _ref(obj: dict[str, Any]) -> list[str]:
    meta = obj["metadata"]
    kind = (
        f"{obj['kind'].lower()}.{obj['apiVersion'].split('/')[0]}" if "/" in obj["apiVersion"] else obj["kind"].lower()
    )
    return [kind, meta["name"], *(["-n", meta["namespace"]] if "namespace" in meta else [])]


def _version(kubectl: Kubectl, obj: dict[str, Any]) -> str:
    """The object's resourceVersion as admin reads it, "" when it does not exist."""
    result = kubectl("get", *_ref(obj), "-o", "jsonpath={.metadata.resourceVersion}", check=False)
    return result.stdout.strip() if result.returncode == 0 else ""


def test_the_team_can_do_its_own_work(tenancy: Tenancy, kubectl: Kubectl) -> None:
    """The control: the same user creates a plain template in its namespace, so refusals below are RBAC's own."""
    template = yaml.safe_load((EXAMPLE / "teams/ml-research/two-gpus.yaml").read_text())
    tenancy.rename(template)
    result = kubectl("create", "-f", "-", *_as_team(tenancy, "ml-research"), stdin=json.dumps(template), check=False)
    assert result.returncode == 0, result.stderr
    kubectl("delete", *_ref(template))


@pytest.mark.parametrize("pr", ESCALATIONS, ids=[pr.name for pr in ESCALATIONS])
def test_the_api_server_refuses_each_escalation(
    pr: PullRequest, tenancy: Tenancy, kubectl: Kubectl, tmp_path: Path
) -> None:
    docs = [tenancy.rename(d) for d in _documents(pr, pr.checkout(into=tmp_path))]
    assert docs, pr.name
    before = [_version(kubectl, doc) for doc in docs]
    refusals: list[str] = []
    admitted: list[dict[str, Any]] = []
    for doc in docs:
        result = kubectl("create", "-f", "-", *_as_team(tenancy, pr.team), stdin=json.dumps(doc), check=False)
        if result.returncode == 0:
            admitted.append(doc)
        else:
            refusals.append(result.stderr.strip())
    try:
        if pr.name == "quota-split":
            # the server counts claims (not templates) against the ResourceQuota: it admits up to the quota
            assert any(QUOTA_REFUSAL in r for r in refusals), refusals
            total = sum(d["spec"]["devices"]["requests"][0]["exactly"]["count"] for d in admitted)
            assert total <= tenancy.quota["gpu.nvidia.com"]
        else:
            assert not admitted, f"{pr.subject}: the API server admitted {[_ref(d) for d in admitted]}"
            assert len(refusals) == len(docs)
            for refusal in refusals:
                assert "forbidden" in refusal.lower(), refusal
        after = [_version(kubectl, doc) if doc not in admitted else rv for doc, rv in zip(docs, before, strict=True)]
        assert after == before, "a refused object changed in the cluster (resourceVersion before → after)"
    finally:
        for doc in admitted:
            kubectl("delete", *_ref(doc), check=False)
