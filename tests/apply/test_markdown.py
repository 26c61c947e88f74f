"""``fleetctl diff -o markdown`` against the sandbox: the pull-request comment, parsed back.

One ``<details>`` block per changed object with its diff fenced inside, the stage table, the
claims with what fits on the cluster's published devices now, the quota; the exit codes of
``fleetctl diff``; and a diff far over GitHub's limit cut between blocks, with the count of what
was left out. And the credential docs/validate.md gives CI: it diffs, and cannot apply.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from fleet.sandbox import Sandbox, credentials
from fleet.views import comments
from fleetctl import cli
from tests.apply.repos import Repo
from tests.conftest import Kubectl
from tests.manifests.repos import ROOT
from tests.markdowns import details, headings, paragraphs, parse, sections, tables

pytestmark = pytest.mark.sandbox


@pytest.fixture(autouse=True)
def _environment(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")


def test_one_block_per_changed_object_then_nothing_once_applied(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.claim_template("ml", "one-gpu")
    repo.claim_template("ml", "two-gpus", count=2)
    path = str(repo.write())
    diff = ["diff", path, "--cluster", repo.cluster, "-o", "markdown", "--base", ""]
    assert cli.run(diff) == 1, "changes: exit 1 as fleetctl diff"
    text = capsys.readouterr().out
    assert text.startswith(comments.DIFF_MARKER + "\n") and len(text) <= comments.LIMIT
    tokens = parse(text)
    assert headings(tokens, 2) == [repo.cluster]
    mine = sections(tokens)[repo.cluster]
    stages, claims, quota = tables(mine)
    assert stages[0] == ["stage", "created", "configured", "unchanged", "deleted", "skipped"]
    created = sum(int(row[1]) for row in stages[1:])
    blocks = details(mine)
    assert created >= 5 and len(blocks) == created, "namespace, class, Role, RoleBinding, quota, 2 templates"
    for opening, fence in blocks:
        assert opening.startswith("<details><summary><b>created</b>")
        assert fence is not None and fence.info == "diff" and fence.content.startswith("--- live ")
    two = next(opening for opening, _ in blocks if f"{repo.ns('ml')}/two-gpus" in opening)
    assert "<code>resource.k8s.io/v1/ResourceClaimTemplate " in two
    assert claims[0][-1].startswith("live context "), "the diffed cluster's devices"
    rows = {row[0]: row for row in claims[1:]}
    pair = rows[f"`ResourceClaimTemplate/{repo.ns('ml')}/two-gpus`"]
    assert pair[1] == "added" and pair[-1].endswith(" now**"), pair
    assert ["ml", f"`{repo.device_class_name}`", "4", "3", "✅"] in quota

    assert cli.run(["apply", path, "--cluster", repo.cluster]) == 0
    capsys.readouterr()
    assert cli.run(diff) == 0, "no changes: exit 0"
    mine = sections(parse(capsys.readouterr().out))[repo.cluster]
    assert details(mine) == []
    assert "No object would change" in headings(mine, 3)


def test_a_huge_diff_is_cut_between_blocks_and_counted(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    """80 templates of 3 KB each (a long annotation): about 250,000 characters of diffs."""
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=None)
    note = "x" * 3000
    for i in range(80):
        repo.files[f"teams/ml/big-{i:02d}.yaml"] = f"""\
            apiVersion: resource.k8s.io/v1
            kind: ResourceClaimTemplate
            metadata:
              name: big-{i:02d}
              namespace: {repo.ns("ml")}
              annotations: {{note: {note}}}
            spec:
              spec:
                devices:
                  requests:
                  - name: gpu
                    exactly: {{deviceClassName: {repo.device_class_name}}}
            """
    path = str(repo.write())
    assert cli.run(["diff", path, "--cluster", repo.cluster, "-o", "markdown", "--base", ""]) == 1
    text = capsys.readouterr().out
    assert len(text) <= comments.LIMIT
    tokens = parse(text)
    blocks = details(tokens)  # balanced, each with its fenced diff
    assert 5 <= len(blocks) < 80 and all(fence is not None for _, fence in blocks)
    (left_out,) = [p for p in paragraphs(tokens) if p.startswith("… ") and "more objects changed" in p]
    count = int(left_out.split()[1])
    assert left_out == f"… {count} more objects changed ({count} created) not shown"
    stages = tables(tokens)[0]
    assert len(blocks) + count == sum(int(row[1]) for row in stages[1:]), "every created object shown or counted"
    assert "Team device quota" in headings(tokens, 3), "the tables after the diffs still fit"


def credential_manifests(*, namespace: str, name: str) -> str:
    """The read-only credential of docs/validate.md, as written there, under this test's names."""
    text = (ROOT / "docs" / "validate.md").read_text()
    section = text.split("### A read-only credential for diff", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("\n```\n", 1)[0]
    return block.replace("fleet-system", namespace).replace("fleet-ci", name)


def test_the_documented_credential_diffs_and_cannot_apply(
    sandbox: Sandbox,
    kubectl: Kubectl,
    namespace: str,
    repo: Repo,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = f"fleet-ci-{repo.id}"
    manifests = credential_manifests(namespace=namespace, name=name)
    kubectl("apply", "-f", "-", stdin=manifests)
    try:
        token = kubectl("-n", namespace, "create", "token", name).stdout.strip()
        config = tmp_path / "kubeconfig"
        shutil.copy(sandbox.kubeconfig, config)
        for args in (
            ("set-credentials", name, f"--token={token}"),
            ("set-context", name, f"--cluster={credentials.CLUSTER}", f"--user={name}"),
            ("use-context", name),
        ):
            sandbox.kubectl("--kubeconfig", str(config), "config", *args)
        probe = ["--kubeconfig", str(config), "-n", namespace, "create", "configmap", "probe"]
        deadline = time.monotonic() + 30
        while "only previews changes" not in sandbox.kubectl(*probe, check=False).stderr:  # the policy is in force
            assert time.monotonic() < deadline, "the ValidatingAdmissionPolicy never refused a write"
            time.sleep(0.5)

        repo.team("ml", namespaces=["ml"], group="ml-research")
        repo.claim_template("ml", "one-gpu")
        path = str(repo.write())
        monkeypatch.setenv("KUBECONFIG", str(config))
        assert cli.run(["diff", path, "--cluster", repo.cluster, "-o", "markdown", "--base", ""]) == 1
        out = capsys.readouterr().out
        assert f"<code>v1/Namespace {repo.ns('ml')}</code>" in out and f"context `{name}`" in out
        assert cli.run(["apply", path, "--cluster", repo.cluster]) == 2
        assert "only previews changes" in capsys.readouterr().err
        assert kubectl("get", "namespace", repo.ns("ml"), check=False).returncode != 0, "nothing was written"
    finally:
        kubectl("delete", "--ignore-not-found", "-f", "-", stdin=manifests, check=False)


def test_several_clusters_make_one_comment(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    """Two Clusters of the repository (both on the sandbox's context here): one heading each, in order."""
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one-gpu")
    other = f"{repo.cluster}-b"
    repo.files["fleet.yaml"] = f"""\
        apiVersion: fleet.gpufleet.dev/v1alpha1
        kind: Fleet
        metadata:
          name: test
        spec:
          clusters: [{repo.cluster}, {other}]
        """
    repo.files[f"clusters/{other}.yaml"] = f"""\
        apiVersion: fleet.gpufleet.dev/v1alpha1
        kind: Cluster
        metadata:
          name: {other}
        spec:
          kubernetesVersion: "1.36"
          context: {credentials.CLUSTER}
        """
    path = str(repo.write())
    both = ["diff", path, "--cluster", other, "--cluster", repo.cluster]
    assert cli.run([*both, "-o", "markdown", "--base", ""]) == 1
    text = capsys.readouterr().out
    assert text.count(comments.DIFF_MARKER) == 1
    tokens = parse(text)
    assert headings(tokens, 2) == [other, repo.cluster]
    assert paragraphs(tokens)[0] == f"**fleet diff** ({other}: changes, {repo.cluster}: changes)"
    for cluster, mine in sections(tokens).items():
        assert any(f"fleet.gpufleet.dev/cluster: {cluster}" in (f.content if f else "") for _, f in details(mine))
    assert cli.run(both) == 2, "several clusters only in one comment"
    assert "several --cluster only go with -o markdown" in capsys.readouterr().err
