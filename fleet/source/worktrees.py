"""A commit of a local repository as a directory: what the console diffs when a person names a revision.

``fleetctl diff`` reads a checkout; to diff another commit of the same repository without
touching the person's work tree, ``checkout`` adds a detached ``git worktree`` of it in a
temporary directory and removes it after. A worktree, not an exported tree: it shares the
repository's refs, so the revision id (``checkouts.revision_id``: the commit, as the files are
those of ``HEAD``) and the base of the comment (``checkouts.default_base``: the merge-base with
``origin/HEAD``, ``origin/main`` or ``main``) are what ``fleetctl diff`` finds in a checkout of
that commit. ``resolve`` turns what a person typed (a full or abbreviated hash, a branch or tag)
into the commit's hash, never reading it as an option; ``log`` lists the branch's last commits.

All of it runs ``git`` (as ``checkouts`` does): callers on an event loop use a worker thread.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fleet.source import checkouts
from fleet.source.errors import RefNotFound, SourceError

_HOOK_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_COMMON_DIR")
_REV = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/@{}~^-]{0,199}$")
"""What a revision may look like: a hash, a ref name, ``HEAD~2``; never an option (``-…``)."""
_FIELD = "\x1f"


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str
    date: str
    """The committer date, ISO 8601."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _HOOK_VARIABLES}
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=False, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SourceError(f"git {args[0]} failed: {err}", where=str(repo), hint="check that git is installed") from err


def resolve(repo: Path, rev: str) -> str:
    """The full hash of the commit ``rev`` names in ``repo``; RefNotFound when it names none."""
    if not _REV.match(rev) or ".." in rev:
        raise RefNotFound(f"{rev!r} is not a revision", where=str(repo), hint="give a commit hash or a branch name")
    done = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if done.returncode != 0 or not done.stdout.strip():
        raise RefNotFound(
            f"no commit {rev!r} in the repository",
            where=str(repo),
            hint="give a commit of the repository's history (git log), or fetch it first",
        )
    return done.stdout.strip()


def log(repo: Path, *, limit: int, rev: str = "HEAD") -> list[Commit]:
    """The last ``limit`` commits of ``rev`` (the checked-out branch), newest first."""
    done = _git(repo, "log", f"-n{limit}", f"--format=%H{_FIELD}%s{_FIELD}%an{_FIELD}%cI", "--end-of-options", rev)
    if done.returncode != 0:
        raise SourceError(f"git log failed: {done.stderr.strip()}", where=str(repo), hint="is it a git repository?")
    commits = []
    for line in done.stdout.splitlines():
        sha, subject, author, date = [*line.split(_FIELD), "", "", ""][:4]
        commits.append(Commit(sha, subject, author, date))
    return commits


@contextmanager
def checkout(repo: Path, sha: str) -> Iterator[Path]:
    """``repo`` (the fleet's folder, maybe below the git root) as commit ``sha`` holds it, in a
    temporary detached worktree that is removed on exit."""
    folder = checkouts.prefix(repo)
    parent = Path(tempfile.mkdtemp(prefix="fleet-revision-"))
    tree = parent / "checkout"
    added = _git(repo, "worktree", "add", "--detach", "--quiet", str(tree), sha)
    if added.returncode != 0:
        shutil.rmtree(parent, ignore_errors=True)
        raise SourceError(f"cannot check out {sha}: {added.stderr.strip()}", where=str(repo), hint="see git's message")
    try:
        yield tree / folder if folder else tree
    finally:
        _git(repo, "worktree", "remove", "--force", str(tree))
        shutil.rmtree(parent, ignore_errors=True)
        _git(repo, "worktree", "prune")


__all__ = ["Commit", "checkout", "log", "resolve"]
