"""``fleetctl validate -o markdown``: the pull-request comment, read back with a markdown parser.

The comment is parsed with markdown-it-py (CommonMark, HTML allowed, as GitHub reads a comment):
the tests look at its headings, tables, list items and code spans, not at strings in the text, so
markdown that a parser reads differently from what was meant fails them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.views import comments
from tests.manifests.repos import EXAMPLE, ROOT
from tests.markdowns import headings, items, paragraphs, parse, sections, tables
from tests.validate.test_inventory import snapshot


def fleetctl(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetctl", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=300,
        check=False,
    )


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@e"
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True)
    return done.stdout


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The example repository committed on ``main``, then on a branch ``pr`` (nothing changed yet)."""
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "pr")
    return repo


def test_example_without_a_base_lists_every_claim_per_cluster() -> None:
    result = fleetctl("validate", "examples/fleet", "-o", "markdown", "--base", "")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith(comments.VALIDATE_MARKER + "\n")
    tokens = parse(text)
    assert headings(tokens, 2) == ["gpu-east", "gpu-west"]
    per_cluster = sections(tokens)
    east_claims, east_quota = tables(per_cluster["gpu-east"])
    assert east_claims[0][:5] == ["claim", "change", "file", "declared pools it can use", "copies that fit"]
    rows = {row[0]: row for row in east_claims[1:]}
    assert len(rows) == 7, "the inference team runs on gpu-east only: 3 + 4 templates"
    two = rows["`ResourceClaimTemplate/ml-research/two-gpus`"]
    assert two[1] == "added"
    assert two[2] == "`examples/fleet/teams/ml-research/two-gpus.yaml:2`"
    assert two[3].split("<br>") == [
        "a100: 4 nodes, 32 devices, 16 at once",
        "h100: 16 nodes, 128 devices, 64 at once",
        "h200: 2 nodes, 16 devices, 8 at once",
    ]
    assert two[4] == "88", "two GPUs a copy: 176 GPUs hold 88 copies"
    assert ["inference", "`gpu.nvidia.com`", "32", "3", "✅"] in east_quota, "gpu-east's overlay raises it to 32"
    west_claims, west_quota = tables(per_cluster["gpu-west"])
    assert len(west_claims) == 5, "ml-research's 4 templates"
    assert ["ml-research", "`gpu.nvidia.com`", "16", "5", "✅"] in west_quota


def test_a_branch_lists_what_it_adds_and_changes_against_the_merge_base(checkout: Path) -> None:
    """The claims a pull request adds or edits (an overlay's edit counts), the quota before and after,
    and its findings at file:line; the base is the merge-base with main when --base is not given."""
    team = checkout / "teams" / "ml-research" / "team.yaml"
    team.write_text(team.read_text().replace("gpu.nvidia.com: 16", "gpu.nvidia.com: 6"))
    two = checkout / "teams" / "ml-research" / "two-gpus.yaml"
    two.write_text(two.read_text().replace("count: 2", "count: 4"))
    (checkout / "teams" / "ml-research" / "h200-pair.yaml").write_text(
        two.read_text()
        .replace("name: two-gpus", "name: h200-pair")
        .replace("count: 4", "count: 2")
        .replace(
            "deviceClassName: gpu.nvidia.com",
            "deviceClassName: gpu.nvidia.com\n            selectors:\n"
            "              - cel:\n                  expression: "
            "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'",
        )
    )
    overlay = checkout / "overlays" / "gpu-east" / "overlay.yaml"
    overlay.write_text(
        overlay.read_text().replace(
            "  patches:\n",
            "  patches:\n  - target: {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate, "
            "namespace: ml-research, name: single-gpu}\n    patch: {metadata: {labels: {tier: east}}}\n",
        )
    )
    git(checkout, "add", ".")
    git(checkout, "commit", "-q", "-m", "pr")
    git(checkout, "checkout", "-q", "main")
    (checkout / "unrelated.yaml").write_text("# main moved on\n")
    git(checkout, "add", ".")
    git(checkout, "commit", "-q", "-m", "later on main")
    git(checkout, "checkout", "-q", "pr")

    result = fleetctl("validate", str(checkout), "-o", "markdown", "--cluster", "gpu-east")
    assert result.returncode == 1, "the quota of 6 is exceeded: an error, exit 1 as validate's"
    tokens = parse(result.stdout)
    assert headings(tokens, 2) == ["gpu-east"], "--cluster: that cluster alone"
    east = sections(tokens)["gpu-east"]
    base = git(checkout, "rev-parse", "main~1").strip()
    assert any(f"compared with `{base[:12]}`" in t.content for t in east if t.type == "inline")
    claims, quota = tables(east)
    changed = {row[0]: row[1] for row in claims[1:]}
    assert changed == {
        "`ResourceClaimTemplate/ml-research/h200-pair`": "added",
        "`ResourceClaimTemplate/ml-research/two-gpus`": "changed",
        "`ResourceClaimTemplate/ml-research/single-gpu`": "changed",  # by gpu-east's overlay
    }
    pair = next(row for row in claims[1:] if "h200-pair" in row[0])
    assert pair[2] == "`teams/ml-research/h200-pair.yaml:2`", "named from the repository's root, as the forge links it"
    assert pair[3] == "h200: 2 nodes, 16 devices, 8 at once" and pair[4] == "8"
    assert ["ml-research", "`gpu.nvidia.com`", "16 → **6**", "5 → **9**", "❌ over quota"] in quota
    findings = items(east)
    (over,) = [f for f in findings if "**team-quota**" in f]
    assert "`teams/ml-research/team.yaml:" in over and "over the quota of 6" in over


def test_an_unknown_base_is_an_error_exit_2(checkout: Path) -> None:
    result = fleetctl("validate", str(checkout), "-o", "markdown", "--base", "no-such-branch")
    assert result.returncode == 2
    assert "'no-such-branch' is not a commit" in result.stderr and "Traceback" not in result.stderr


def test_outside_git_every_claim_is_listed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    result = fleetctl("validate", str(repo), "-o", "markdown", "--cluster", "gpu-west", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "no base to compare with: every claim is listed" in result.stdout
    assert len(tables(parse(result.stdout))[0]) == 5


def test_many_claims_and_findings_stay_within_githubs_limit(checkout: Path) -> None:
    """1,000 new templates, a table row each on both clusters: the comment is cut between rows,
    counts what it left out, and still parses."""
    folder = checkout / "teams" / "ml-research"
    text = (folder / "two-gpus.yaml").read_text()
    for i in range(1000):
        (folder / f"bulk-{i:04d}.yaml").write_text(text.replace("name: two-gpus", f"name: bulk-{i:04d}-gpus"))
    result = fleetctl("validate", str(checkout), "-o", "markdown")
    assert result.returncode == 1
    out = result.stdout
    assert len(out) <= comments.LIMIT
    tokens = parse(out)
    assert headings(tokens, 2) == ["gpu-east", "gpu-west"]
    paragraphs = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "paragraph_open"]
    left_out = [p for p in paragraphs if p.startswith("… ") and "not shown" in p]
    assert any("more claims (" in p and "added)" in p for p in left_out), left_out
    shown = sum(len(t) - 1 for t in tables(tokens) if t[0][0] == "claim")
    counted = sum(int(p.split()[1]) for p in left_out if "more claims" in p)
    assert shown + counted == 2 * 1000, "every new template on both clusters, each shown or counted"


def test_a_repository_in_a_sub_folder_is_read_from_the_base_commit(tmp_path: Path) -> None:
    """The fleet in a sub-folder of a git checkout: the base commit's files under that folder are
    the same templates, so nothing is added or changed."""
    top = tmp_path / "platform"
    shutil.copytree(EXAMPLE, top / "fleets" / "prod")
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(top), *argv], check=True, capture_output=True)
    result = fleetctl("validate", "fleets/prod", "-o", "markdown", "--base", "HEAD", cwd=top)
    assert result.returncode == 0, result.stderr
    tokens = parse(result.stdout)
    assert [t for t in tables(tokens) if t[0][0] == "claim"] == [], "no claim added or changed"
    assert paragraphs(tokens).count("None.") == 2
    two = top / "fleets" / "prod" / "teams" / "ml-research" / "two-gpus.yaml"
    two.write_text(two.read_text().replace("count: 2", "count: 1"))
    result = fleetctl("validate", str(top / "fleets" / "prod"), "-o", "markdown", "--base", "HEAD")
    rows = [row for t in tables(parse(result.stdout)) if t[0][0] == "claim" for row in t[1:]]
    assert [row[2] for row in rows] == ["`fleets/prod/teams/ml-research/two-gpus.yaml:2`"] * 2, "from the git root"


def test_a_snapshot_adds_its_counts_beside_the_declared_pools(tmp_path: Path) -> None:
    """--inventory: the claims of its cluster get a column for the snapshot's devices; an unsatisfiable
    one says so there, and its finding is listed with file:line:col."""
    west = snapshot(tmp_path, "a100-node.yaml", cluster="gpu-west")
    result = fleetctl("validate", str(EXAMPLE), "-o", "markdown", "--inventory", str(west), "--base", "")
    assert result.returncode == 1
    per_cluster = sections(parse(result.stdout))
    claims = tables(per_cluster["gpu-west"])[0]
    assert claims[0][-1] == f"snapshot {west}"
    rows = {row[0]: row for row in claims[1:]}
    assert rows["`ResourceClaimTemplate/ml-research/h100-gpu`"][-1] == "**unsatisfiable**"
    assert rows["`ResourceClaimTemplate/ml-research/single-gpu`"][-1] == "1 node, 8 devices, 8 at once"
    assert rows["`ResourceClaimTemplate/ml-research/single-gpu`"][3] == "h100: 2 nodes, 16 devices, 16 at once"
    assert tables(per_cluster["gpu-east"])[0][0][-1] == "copies that fit", "no snapshot for gpu-east"
    (unsatisfiable,) = [i for i in items(per_cluster["gpu-west"]) if "claim-unsatisfiable" in i]
    assert unsatisfiable.startswith("❌ `examples/fleet/teams/ml-research/h100-gpu.yaml:17:21` **claim-unsatisfiable**")
    assert unsatisfiable not in items(per_cluster["gpu-east"]), "a finding of gpu-west only"
