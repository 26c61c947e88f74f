"""The commits a ``GitSource`` has fetched, read without writing its cache repository.

fleet-controller's console shows what each fetched commit would change (the Revision page), from
the bare cache repository its ``GitSource`` keeps under ``--state-dir``. Only the source writes
that repository (fetches, ``git gc --prune=now``, its lock files: ``fleet.source.sources``), so
nothing here writes in it: no ``git worktree``, no ref, no lock.

- ``history`` lists the followed ref's commits that the cache holds, newest first. The source
  fetches shallow (``--depth=1``), so git's own walk stops at the newest commit: every fetched
  tip is a shallow boundary. The walk here reads each commit's raw object (``git cat-file``,
  which shallow grafts do not rewrite) and follows its first parent while that parent's object
  is in the cache: the commits the controller fetched one after another, back to the first it
  fetched or the last ``git gc`` (which keeps only what the followed commit reaches).
- ``borrowed`` checks one of them out in a temporary repository that borrows the cache's objects
  (``objects/info/alternates``) with ``HEAD`` detached at the commit, so ``fleetctl diff``'s
  readers see a checkout of that commit: the revision id is its hash, and its first parent (the
  base of the comment's claims and quotas) resolves there. Symlinks are checked out as plain
  files, as the source's own checkouts are.

Everything runs ``git``: callers on an event loop use a worker thread. A ``gc`` in the cache
during a read can take objects away; the read then fails with a ``SourceError``, and the next
one finds what is left.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from fleet.source.errors import SourceError
from fleet.source.worktrees import Commit

_HOOK_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")


@dataclass(frozen=True)
class Raw:
    """A commit object as git stores it: what ``history`` lists, and its parents."""

    commit: Commit
    parents: tuple[str, ...]


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in _HOOK_VARIABLES}
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise SourceError(f"git {args[0]} failed: {err}", where=str(repo), hint="check that git is installed") from err


def read(git_dir: Path, sha: str) -> Raw | None:
    """The commit ``sha`` as the cache holds it; None when its object is not there."""
    done = _git(git_dir, "cat-file", "commit", sha)
    if done.returncode != 0:
        return None
    head, _, message = done.stdout.decode(errors="replace").partition("\n\n")
    parents: list[str] = []
    author = date = ""
    for line in head.splitlines():
        key, _, value = line.partition(" ")
        if key == "parent":
            parents.append(value.strip())
        elif key == "author":
            author = value.rpartition(" <")[0] if " <" in value else value
        elif key == "committer":
            date = _date(value)
    subject = " ".join(message.split("\n\n", 1)[0].split())
    return Raw(Commit(sha, subject, author, date), tuple(parents))


def _date(committer: str) -> str:
    """``Name <email> 1700000000 +0100`` → ``2023-11-14T23:13:20+01:00`` (git's ``%cI``)."""
    try:
        stamp, zone = committer.rsplit(" ", 2)[-2:]
        sign = -1 if zone.startswith("-") else 1
        offset = datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[3:5])) * sign
        return datetime.datetime.fromtimestamp(int(stamp), datetime.timezone(offset)).isoformat()
    except ValueError:
        return ""


def history(git_dir: Path, *, ref: str, limit: int) -> list[Commit]:
    """The last ``limit`` commits of ``ref`` that ``git_dir`` holds (first parents), newest first; [] before a fetch."""
    if not (git_dir / "HEAD").exists():
        return []
    done = _git(git_dir, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    sha = done.stdout.decode().strip() if done.returncode == 0 else ""
    commits: list[Commit] = []
    while sha and len(commits) < limit:
        found = read(git_dir, sha)
        if found is None:
            break
        commits.append(found.commit)
        sha = found.parents[0] if found.parents else ""
    return commits


@contextmanager
def borrowed(git_dir: Path, sha: str, *, path: str = "") -> Iterator[tuple[Path, str | None]]:
    """The directory ``path`` of commit ``sha`` checked out in a temporary repository borrowing ``git_dir``'s
    objects, and the commit's first parent when ``git_dir`` holds it (else None); removed on exit."""
    raw = read(git_dir, sha)
    if raw is None:
        raise SourceError(f"no commit {sha} in the cache", where=str(git_dir), hint="it was collected: look again")
    parent = raw.parents[0] if raw.parents and read(git_dir, raw.parents[0]) is not None else None
    top = Path(tempfile.mkdtemp(prefix="fleet-revision-"))
    tree = top / "checkout"
    try:
        _check(_git(top, "init", "--quiet", str(tree)), "init", git_dir)
        (tree / ".git" / "objects" / "info" / "alternates").write_text(f"{(git_dir / 'objects').resolve()}\n")
        _check(_git(tree, "config", "core.symlinks", "false"), "config", git_dir)
        _check(_git(tree, "read-tree", "-u", "--reset", sha), "read-tree", git_dir)
        _check(_git(tree, "update-ref", "--no-deref", "HEAD", sha), "update-ref", git_dir)
        folder = tree.joinpath(*PurePosixPath(path).parts) if path else tree
        if not folder.is_dir():
            raise SourceError(
                f"the directory {path!r} does not exist in commit {sha[:12]}",
                where=str(git_dir),
                hint="the source's path setting names a directory this commit does not have",
            )
        yield folder, parent
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _check(done: subprocess.CompletedProcess[bytes], verb: str, git_dir: Path) -> None:
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise SourceError(f"git {verb} failed: {message}", where=str(git_dir), hint="see git's message")


__all__ = ["Raw", "borrowed", "history", "read"]
