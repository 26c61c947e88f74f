"""``fleetctl diff -o markdown`` against the sandbox: the pull-request comment, parsed back.

One ``<details>`` block per changed object with its diff fenced inside, the stage table, the
claims with what fits on the cluster's published devices now, the quota; the exit codes of
``fleetctl diff``; and a diff far over GitHub's limit cut between blocks, with the count of what
was left out.
"""

from __future__ import annotations

import pytest

from fleet.sandbox import Sandbox
from fleetctl import cli, comments
from tests.apply.repos import Repo
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
