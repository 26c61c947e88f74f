"""The revision id of a local checkout: the commit, plus a content hash when the tree differs.

A run records which stages it finished under the revision id (the ledger's
``progress``), and a run killed half-way resumes by skipping those stages when the
id is the same. So the id must change whenever the content fleet loads changes:
``<sha>-dirty`` would name two different edits of one commit alike, and a resumed
run would skip stages whose objects are no longer what was applied.

The id is therefore computed from exactly what the loader read (``files``, path →
bytes), compared with the commit:

- every loaded file is byte-identical to its blob at ``HEAD`` and ``HEAD`` holds no
  other file the loader would read → the commit SHA;
- otherwise → ``<sha>-dirty-<hash of the loaded files>``;
- not in a git work tree (or git missing) → ``content-<hash of the loaded files>``.

Comparing blob ids (git's own ``sha1("blob <size>\\0" + content)``) with the tree
needs no ``git status`` and sees exactly the files the loader reads, also ignored or
untracked ones that ``git status`` would hide or that lie outside the repository
sub-folder. Two ``git`` processes find the work tree and ``HEAD`` (``git rev-parse``) and
list the commit's tree (``git ls-tree``); callers on an event loop run this in a worker
thread (``fleet.engine.pipelines`` loads the plan in one). GitPython, which the
controller's ``GitSource`` uses, would run the same two commands after importing itself at
every ``fleetctl`` start. ``GIT_DIR``, ``GIT_WORK_TREE`` and the index are not
passed on: inside a git hook they name the hook's repository, not the checkout given.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

from fleet.source.errors import RefNotFound


def revision_id(repo: Path, *, files: Mapping[str, bytes], loadable: Callable[[str], bool]) -> str:
    """The id of the content ``files`` (relative to ``repo``) loaded from the checkout at ``repo``.

    ``loadable(path)`` says whether the loader reads a file of that relative path: a
    committed one it would read but ``files`` lacks was deleted from the work tree.
    """
    content = content_hash(files)
    commit = _head(repo, loadable=loadable)
    if commit is None:
        return f"content-{content}"
    sha, committed = commit
    if committed == {name: blob_id(data) for name, data in files.items()}:
        return sha
    return f"{sha}-dirty-{content}"


def content_hash(files: Mapping[str, bytes]) -> str:
    """12 hex digits of a SHA-256 over the files' names and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(os.fsencode(name) + b"\0" + files[name] + b"\0")
    return digest.hexdigest()[:12]


def blob_id(data: bytes) -> str:
    """The object id git gives ``data`` as a blob."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _head(repo: Path, *, loadable: Callable[[str], bool]) -> tuple[str, dict[str, str]] | None:
    """``HEAD``'s SHA and the blob ids of the loadable files under ``repo`` in it; None outside git.

    None too in a bare repository, before the first commit, and where ``git`` is not installed.
    """
    found = _git(repo, "rev-parse", "--show-toplevel", "--verify", "-q", "HEAD^{commit}")
    if found is None:
        return None
    top, _, sha = found.strip().partition("\n")
    if not top or not sha:
        return None
    prefix = repo.resolve().relative_to(Path(top).resolve()).as_posix()
    # One `git ls-tree` rather than tree objects walked in Python, which is far slower.
    listing = _git(repo, "ls-tree", "-r", "-z", "--full-tree", sha, "--", "." if prefix == "." else f"{prefix}/")
    if listing is None:
        return None
    blobs: dict[str, str] = {}
    for entry in listing.split("\0"):
        info, _, path = entry.partition("\t")
        fields = info.split()
        if len(fields) != 3 or fields[1] != "blob":
            continue
        rel = PurePosixPath(path).relative_to(prefix).as_posix() if prefix != "." else path
        if loadable(rel):
            blobs[rel] = fields[2]
    return sha, blobs


BASE_CANDIDATES = ("origin/HEAD", "origin/main", "main")
"""Where a pull request's base is looked for, in order: its merge-base with ``HEAD`` is the base."""


def default_base(repo: Path) -> str | None:
    """The merge-base of ``HEAD`` with the first of ``BASE_CANDIDATES`` that exists; None outside git or without one.

    A CI checkout of a pull request has ``origin/main`` (or ``origin/HEAD``) when it fetched it;
    the merge-base, not the branch's tip, is what the pull request changes (as GitHub's diff shows).
    """
    for candidate in BASE_CANDIDATES:
        if _git(repo, "rev-parse", "--verify", "-q", f"{candidate}^{{commit}}") is None:
            continue
        found = _git(repo, "merge-base", "HEAD", candidate)
        if found and found.strip():
            return found.strip()
    return None


def prefix(repo: Path) -> str:
    """``repo``'s path inside its git work tree (``fleet/`` for a sub-folder), "" at the root or outside git.

    A forge links a file by its path from the repository's root: a pull request's comment
    names files so (``fleetctl diff -o markdown``), whichever folder the fleet sits in."""
    found = _git(repo, "rev-parse", "--show-prefix")
    return (found or "").strip()


def files_at(repo: Path, *, ref: str, loadable: Callable[[str], bool], max_bytes: int) -> dict[str, bytes]:
    """The loadable files under ``repo`` (relative to it) as commit ``ref`` holds them.

    What ``fleet.manifests.read_tree`` reads from a work tree, read from git's object store
    instead: the base of a pull request without checking it out. A blob over ``max_bytes`` is
    left out (the loader's file cap). Raises RefNotFound when ``ref`` names no commit here.
    """
    found = _git(repo, "rev-parse", "--show-toplevel", "--verify", "-q", f"{ref}^{{commit}}")
    top, _, sha = (found or "").strip().partition("\n")
    if not top or not sha:
        raise RefNotFound(
            f"{ref!r} is not a commit of the git repository at {repo}",
            where=str(repo),
            hint="pass --base a branch, tag or commit that this checkout has (git fetch it first), "
            "or --base '' to compare with nothing",
        )
    prefix = repo.resolve().relative_to(Path(top).resolve()).as_posix()
    listing = _git(repo, "ls-tree", "-r", "-z", "-l", "--full-tree", sha, "--", "." if prefix == "." else f"{prefix}/")
    wanted: dict[str, str] = {}
    for entry in (listing or "").split("\0"):
        info, _, path = entry.partition("\t")
        fields = info.split()
        if len(fields) != 4 or fields[1] != "blob" or not fields[3].isdigit() or int(fields[3]) > max_bytes:
            continue
        rel = PurePosixPath(path).relative_to(prefix).as_posix() if prefix != "." else path
        if loadable(rel):
            wanted[rel] = fields[2]
    return _blobs(repo, wanted)


def _blobs(repo: Path, wanted: Mapping[str, str]) -> dict[str, bytes]:
    """``{path: content}`` for ``{path: blob id}``, through one ``git cat-file --batch``."""
    if not wanted:
        return {}
    env = {k: v for k, v in os.environ.items() if k not in _HOOK_VARIABLES}
    ids = list(dict.fromkeys(wanted.values()))
    done = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch"],
        input="".join(f"{i}\n" for i in ids).encode(),
        capture_output=True,
        env=env,
        check=False,
        timeout=60,
    )
    data, contents, at = done.stdout, {}, 0
    for blob in ids:
        end = data.index(b"\n", at)
        header = data[at:end].split()
        size = int(header[2])
        contents[blob] = data[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return {path: contents[blob] for path, blob in wanted.items()}


_HOOK_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_COMMON_DIR")


def _git(repo: Path, *args: str) -> str | None:
    """``git -C repo args`` standard output; None when git fails or is missing."""
    env = {k: v for k, v in os.environ.items() if k not in _HOOK_VARIABLES}
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # File names are bytes to git: decoded as the file system's names are (os.fsdecode), so a
    # name that is not UTF-8 compares equal to the one the tree reader found.
    return os.fsdecode(done.stdout) if done.returncode == 0 else None


__all__ = ["BASE_CANDIDATES", "blob_id", "content_hash", "default_base", "files_at", "prefix", "revision_id"]
