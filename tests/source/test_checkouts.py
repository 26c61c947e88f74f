"""Revision ids of real git checkouts: the commit when clean, a content hash when the tree differs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fleet.manifests import Limits, read_tree
from fleet.manifests.trees import loadable
from fleet.source import checkouts, revision_id


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


def rid(root: Path) -> str:
    files, _ = read_tree(root, limits=Limits())
    return revision_id(root, files=files, loadable=loadable)


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "teams" / "ml").mkdir(parents=True)
    (root / "fleet.yaml").write_text("kind: Fleet\n")
    (root / "teams" / "ml" / "team.yaml").write_text("kind: Team\n")
    (root / "README.md").write_text("not loaded\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "one")
    return root


def test_clean_checkout_is_its_commit(checkout: Path) -> None:
    assert rid(checkout) == git(checkout, "rev-parse", "HEAD")
    (checkout / "README.md").write_text("edited, but fleet does not read it\n")
    (checkout / ".hidden.yaml").write_text("kind: Nothing\n")
    assert rid(checkout) == git(checkout, "rev-parse", "HEAD"), "files the loader skips do not make it dirty"


def test_two_dirty_contents_of_one_commit_get_two_ids(checkout: Path) -> None:
    sha = git(checkout, "rev-parse", "HEAD")
    team = checkout / "teams" / "ml" / "team.yaml"
    team.write_text("kind: Team\nspec: {quota: 4}\n")
    first = rid(checkout)
    team.write_text("kind: Team\nspec: {quota: 6}\n")
    second = rid(checkout)
    assert first.startswith(f"{sha}-dirty-") and second.startswith(f"{sha}-dirty-")
    assert first != second
    team.write_text("kind: Team\nspec: {quota: 4}\n")
    assert rid(checkout) == first, "the same content has the same id"


@pytest.mark.parametrize("change", ["untracked", "ignored", "deleted", "staged"])
def test_every_change_the_loader_sees_makes_the_tree_dirty(checkout: Path, change: str) -> None:
    sha = git(checkout, "rev-parse", "HEAD")
    if change == "untracked":
        (checkout / "teams" / "ml" / "claim.yaml").write_text("kind: ResourceClaimTemplate\n")
    elif change == "ignored":
        (checkout / ".gitignore").write_text("secret.yaml\n")
        git(checkout, "add", ".gitignore")
        git(checkout, "commit", "-qm", "ignore")
        sha = git(checkout, "rev-parse", "HEAD")
        (checkout / "secret.yaml").write_text("kind: Team\n")
    elif change == "deleted":
        (checkout / "teams" / "ml" / "team.yaml").unlink()
    else:
        (checkout / "fleet.yaml").write_text("kind: Fleet\nspec: {}\n")
        git(checkout, "add", "fleet.yaml")
    assert rid(checkout).startswith(f"{sha}-dirty-")


def test_a_sub_folder_is_judged_by_its_own_files(checkout: Path) -> None:
    sha = git(checkout, "rev-parse", "HEAD")
    sub = checkout / "teams"
    assert rid(sub) == sha
    (checkout / "fleet.yaml").write_text("kind: Fleet\nspec: {}\n")
    assert rid(sub) == sha, "a change outside the folder fleet loads is no change of its content"
    (sub / "ml" / "team.yaml").write_text("kind: Team\nspec: {}\n")
    assert rid(sub).startswith(f"{sha}-dirty-")
    new = checkout / "new"
    new.mkdir()
    (new / "a.yaml").write_text("kind: Team\n")
    assert rid(new).startswith(f"{sha}-dirty-"), "a folder the commit does not have"


def test_outside_git_the_id_is_the_content_hash(tmp_path: Path) -> None:
    (tmp_path / "fleet.yaml").write_text("kind: Fleet\n")
    files, _ = read_tree(tmp_path, limits=Limits())
    assert rid(tmp_path) == f"content-{checkouts.content_hash(files)}"
    (tmp_path / "fleet.yaml").write_text("kind: Fleet\nspec: {}\n")
    assert rid(tmp_path) != f"content-{checkouts.content_hash(files)}"


def test_blob_ids_are_gits(checkout: Path) -> None:
    data = (checkout / "fleet.yaml").read_bytes()
    assert checkouts.blob_id(data) == git(checkout, "hash-object", "fleet.yaml")


def test_a_bare_repository_or_one_without_commits_is_no_checkout(tmp_path: Path) -> None:
    bare, empty = tmp_path / "bare", tmp_path / "empty"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(tmp_path, "init", "-q", str(empty))
    for root in (bare, empty):
        (root / "fleet.yaml").write_text("kind: Fleet\n")
        files, _ = read_tree(root, limits=Limits())
        assert rid(root) == f"content-{checkouts.content_hash(files)}", root.name


def test_without_git_installed_the_id_is_the_content_hash(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(checkout / "no-such-bin"))
    files, _ = read_tree(checkout, limits=Limits())
    assert rid(checkout) == f"content-{checkouts.content_hash(files)}"


def test_inside_a_git_hook_the_checkout_given_is_judged(
    checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pre-commit hook of another repository runs ``fleetctl validate`` with GIT_DIR set to its own."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.yaml").write_text("kind: Team\n")
    git(other, "init", "-q")
    git(other, "add", ".")
    git(other, "commit", "-qm", "other")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    assert rid(checkout) == git(checkout, "rev-parse", "HEAD")  # git() passes none of them on


def test_a_file_name_that_is_not_utf8_is_compared_as_the_file_system_names_it(checkout: Path) -> None:
    name = os.fsdecode(b"team-\xe9.yaml")  # Latin-1 é: not UTF-8
    (checkout / name).write_text("kind: Team\n")
    git(checkout, "add", "-A")
    git(checkout, "commit", "-qm", "latin-1 name")
    assert rid(checkout) == git(checkout, "rev-parse", "HEAD")
