"""The git source: bring the newest commit of one ref from a remote into a directory of its own.

``GitSource.sync()`` is the whole API. It fetches the ref from the remote into a
**bare** cache repository (cloned, in effect, on the first call), shallow where
the transport allows it (``--depth=1``; a dumb HTTP server gets a full fetch),
resolves the commit, and checks that commit's tree out into
``<cache_dir>/checkouts/<sha>``. The answer is a ``Checkout``: the full commit SHA
(the Revision), the fleet repository's directory in it, and when it was fetched.

Why shaped like this:

- **Every revision gets its own directory.** The controller loads a checkout in a
  worker thread while a webhook may already be fetching the next commit; checking
  out in place would change files under the reader. A directory is written as
  ``<sha>.partial`` and renamed when complete, so a directory named by a SHA is
  always whole and always that revision. The newest ``keep`` checkouts are kept.
  Writing every file of a large repository for each commit is slow (creating files
  dominates), so the oldest checkout is *recycled*: renamed
  to the new ``.partial`` first (a reader still holding it fails instead of reading
  another revision), then brought to the new commit by ``git read-tree -u --reset``
  with its own index, which writes only the files that differ. Until ``keep``
  checkouts exist there is none to recycle, so ``collect()`` prepares *spares*
  (``spare-<n>``: a checkout of the current revision, written while nothing waits
  for it) and the next new revisions take a spare instead of writing every file.
- **The remote's URL is never stored.** git fetches from the URL given on each
  call into ``refs/fleet/target`` with a forced refspec (``+``), so a force-pushed
  branch is simply followed, and ``.git/config`` holds no URL (and so no login).
  The cache repository is named after a hash of the URL: a new URL is a new clone.
- **Credentials are files** (``fleet.source.credentials``): never in argv, env
  values, config, logs or errors.
- **Symlinks are checked out as plain files** (``core.symlinks=false``): a commit
  cannot make the loader read a file outside the checkout (a mounted token, say).
- **Blocking git runs in worker threads**, each command under the sync's deadline
  (``timeout``). The fetch runs in its own process group, polled every 0.2 s: when
  the deadline passes, the objects it wrote exceed ``max_bytes``, or the caller is
  cancelled, the whole group (git, its remote helper, ssh, index-pack) is killed.
  Fetched objects always land in packs (``fetch.unpackLimit=1``), so the size
  polled is that of ``objects/pack``, partial pack included. git's automatic
  maintenance is off during the fetch (a repack there would count against the
  limit and the deadline); once more than ``PACK_LIMIT`` packs pile up, the source
  runs ``git gc --prune=now`` after the checkout, which also drops the objects of
  commits a force-push left behind. A caller that wants the checkout at once (the
  controller: a repack of a 10,000-file repository takes seconds) passes
  ``sync(collect=False)`` and calls ``collect()`` once the revision is on its way.
  ``max_bytes`` also bounds the checked-out tree, summed from ``git ls-tree``
  before anything is written.
- One ``sync`` at a time per source (an ``anyio.Lock``): a webhook and the poll
  timer may both ask; the second one then fetches again, which is cheap. The cache
  directory belongs to one source: lock files and partial packs that a killed git
  left behind are removed before the next fetch, and a fetch that fails for a
  reason that is not the remote's (a broken cache repository) is retried once from
  a fresh clone.

Errors are ``fleet.source.errors.SourceError`` subclasses whose ``where`` is the URL
without credentials; git's own message is quoted with secrets scrubbed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import anyio
import anyio.to_thread
import git
from opentelemetry import trace

from fleet.source import credentials as creds
from fleet.source import errors, urls
from fleet.telemetry import tracing

logger = logging.getLogger(__name__)

TARGET = "refs/fleet/target"
EMERGENCY_TRAILER = "Fleet-Emergency"
"""The commit trailer that lets a commit's disruptive changes skip the maintenance window."""
_POLL = 0.2
_GRACE = 10.0
_TIMEOUT_HINT = (
    "check the remote is reachable from the controller (network policy, proxy), "
    "or raise the source timeout for a large repository"
)
_CONFIG = (
    "-c",
    "core.symlinks=false",
    "-c",
    "fetch.unpackLimit=1",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
)
PACK_LIMIT = 20
"""Packs in the cache repository (one per fetch that brought something) before ``git gc``."""


@dataclass(frozen=True)
class Changed:
    """The files (relative to the source's ``path``) that differ between two commits, as git says."""

    since: str
    """The earlier commit: the last one this source checked out before."""
    paths: frozenset[str]


@dataclass(frozen=True)
class Checkout:
    """One fetched revision, checked out in a directory of its own that does not change."""

    revision: str
    """The full commit SHA."""
    path: Path
    """The fleet repository's directory (the checkout's root joined with the source's ``path``)."""
    fetched_at: float
    """``time.time()`` when the fetch finished."""
    fetched_in: trace.SpanContext | None = None
    """The ``git fetch`` span that brought it: the controller continues that trace while it
    applies (or refuses) the revision, so one trace tells what happened to the commit."""
    changed: Changed | None = None
    """What changed since the checkout before (None for the first, or when git could not tell):
    a reader that kept that checkout's files re-reads only these (``trees.read_changed``)."""
    emergency: str = ""
    """The commit's ``Fleet-Emergency:`` trailer: why its disruptive changes may skip the maintenance
    window (``fleet.engine.waits``); empty for an ordinary commit."""
    author: str = ""
    """The commit's author (``Name <email>``): who asked for the emergency."""


class GitSource:
    """Follows ``ref`` (a branch or tag; ``None`` = the remote's HEAD) of the repository at ``url``.

    ``path`` is the fleet repository's directory inside the git repository (``""`` for
    the root). ``cache_dir`` holds the bare cache repository, the checkouts and the
    askpass helper; it must be private to this process. ``timeout`` bounds one whole
    ``sync``; ``max_bytes`` (if set) bounds the objects one fetch brings and the
    size of the checked-out tree.
    """

    def __init__(
        self,
        *,
        url: str,
        ref: str | None,
        path: str,
        cache_dir: Path,
        credentials: creds.Credentials | None = None,
        timeout: float = 60.0,
        max_bytes: int | None = None,
        keep: int = 3,
    ) -> None:
        urls.check(url)
        self.url = url
        self.ref = _ref(ref, url=url)
        self.path = _relative(path, url=url)
        self.cache_dir = cache_dir
        self.credentials = credentials
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.keep = max(1, keep)
        self.where = urls.redact(url)
        digest = hashlib.sha256(url.encode()).hexdigest()[:16]
        self._git_dir = cache_dir / "repos" / f"{digest}.git"
        self._checkouts = cache_dir / "checkouts"
        self._shallow = True
        self._lock = anyio.Lock()
        self._last: str | None = None
        """The commit the last ``sync`` returned."""

    @property
    def repository(self) -> Path:
        """The bare cache repository: what was fetched, for readers that never write it (``histories``)."""
        return self._git_dir

    async def sync(self, *, collect: bool = True) -> Checkout:
        """Fetch the newest commit of the ref and check it out; raises ``SourceError``.

        With ``collect=False`` the repack that piled-up packs call for is left to ``collect()``.
        """
        async with self._lock:
            with tracing.tracer().start_as_current_span("git fetch") as span:
                span.set_attribute("vcs.repository.url.full", self.where)
                span.set_attribute("vcs.ref.head.name", self.ref or "HEAD")
                stop = threading.Event()
                done = threading.Event()
                work = functools.partial(self._sync_blocking, stop=stop, done=done, collect=collect)
                try:
                    # The thread keeps the deadline itself; this one only catches a thread that
                    # does not come back (a hung file system), which is then abandoned.
                    with anyio.fail_after(self.timeout + _GRACE):
                        checkout = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
                except TimeoutError:
                    stop.set()
                    span.set_attribute("error.type", errors.Unreachable.reason)
                    raise errors.Unreachable(
                        f"git did not finish within {self.timeout:g} s", where=self.where, hint=_TIMEOUT_HINT
                    ) from None
                except anyio.get_cancelled_exc_class():
                    stop.set()  # the worker kills git within _POLL seconds and returns
                    with anyio.CancelScope(shield=True), anyio.move_on_after(_GRACE):
                        await anyio.to_thread.run_sync(done.wait, abandon_on_cancel=True)
                    raise
                except errors.SourceError as err:
                    span.set_attribute("error.type", err.reason)
                    raise
                span.set_attribute(tracing.REVISION, checkout.revision)
                return dataclasses.replace(checkout, fetched_in=span.get_span_context())

    async def collect(self) -> None:
        """Repack the cache repository if packs piled up (``git gc``), as ``sync()`` does after a
        checkout; and prepare one spare checkout while fewer than ``keep`` directories exist.

        Under the sync lock, so it never runs beside a fetch (``--prune=now`` would drop the
        objects a running fetch has written but not yet referenced). A failure is logged: the
        next call tries again.
        """
        async with self._lock:
            deadline = time.monotonic() + self.timeout

            def work() -> None:
                self._collect(deadline=deadline)
                self._prepare_spare(deadline=deadline)

            # Cancelled (shutdown), the thread is left to finish; git keeps the repository consistent.
            await anyio.to_thread.run_sync(work, abandon_on_cancel=True)

    # -- everything below runs in a worker thread --------------------------------------------------

    def _sync_blocking(self, *, stop: threading.Event, done: threading.Event, collect: bool = True) -> Checkout:
        try:
            deadline = time.monotonic() + self.timeout
            creds.check(self.credentials, url=self.url)
            env = creds.environment(self.credentials, url=self.url, helper_dir=self.cache_dir)
            existed = (self._git_dir / "HEAD").exists()
            try:
                sha, root = self._attempt(env=env, deadline=deadline, stop=stop)
            except errors.SourceError as err:
                if not existed or type(err) is not errors.SourceError or stop.is_set():
                    raise
                # Not the remote's fault (unreachable, refused, missing ref, too large): a broken
                # cache repository (lost or corrupt objects, a bad shallow file). A fresh clone repairs it.
                logger.warning("%s: the cache repository failed (%s); cloning afresh", self.where, err.what)
                shutil.rmtree(self._git_dir, ignore_errors=True)
                sha, root = self._attempt(env=env, deadline=deadline, stop=stop)
            target = root.joinpath(*PurePosixPath(self.path).parts) if self.path else root
            if not target.is_dir():
                raise errors.PathNotFound(
                    f"the directory {self.path!r} does not exist in commit {sha[:12]}",
                    where=self.where,
                    hint="check the source's path setting against the repository layout at that commit",
                )
            self._forget_old(current=sha)
            changed = self._changed(since=self._last, sha=sha, deadline=deadline)
            if collect:
                self._collect(deadline=deadline)
            self._last = sha
            emergency, author = self._emergency(sha=sha, deadline=deadline)
            return Checkout(
                revision=sha, path=target, fetched_at=time.time(), changed=changed, emergency=emergency, author=author
            )
        finally:
            done.set()

    def _attempt(self, *, env: dict[str, str], deadline: float, stop: threading.Event) -> tuple[str, Path]:
        repo = self._repo()
        self._fetch(repo, env=env, deadline=deadline, stop=stop)
        sha = self._git(repo, ["rev-parse", "--verify", f"{TARGET}^{{commit}}"], deadline=deadline).strip()
        return sha, self._checkout(repo, sha=sha, deadline=deadline)

    def _changed(self, *, since: str | None, sha: str, deadline: float) -> Changed | None:
        """The loadable paths under ``path`` that differ between ``since`` and ``sha``: one ``git
        diff-tree`` of two trees the cache repository holds. None when it cannot say (the earlier
        commit was collected, a name git cannot give as text): the reader then reads the whole tree."""
        if since is None:
            return None
        if since == sha:
            return Changed(since=since, paths=frozenset())
        prefix = f"{self.path.strip('/')}/" if self.path.strip("/") else ""
        args = ["diff-tree", "-r", "-z", "--name-only", "--no-renames", since, sha]
        try:
            out = self._git(git.Repo(self._git_dir), [*args, "--", prefix] if prefix else args, deadline=deadline)
        except (errors.SourceError, git.GitError) as err:
            logger.debug("%s: git diff-tree %s %s failed, the whole tree is read: %s", self.where, since, sha, err)
            return None
        names = [name for name in out.split("\0") if name]
        if any("\ufffd" in name for name in names):
            return None
        return Changed(since=since, paths=frozenset(n[len(prefix) :] for n in names if n.startswith(prefix)))

    def _emergency(self, *, sha: str, deadline: float) -> tuple[str, str]:
        """The commit's ``Fleet-Emergency:`` trailer (its values joined) and its author."""
        fmt = f"--format=%an <%ae>%x1f%(trailers:key={EMERGENCY_TRAILER},valueonly,separator=%x3b )"
        out = self._git(git.Repo(self._git_dir), ["log", "-1", fmt, sha], deadline=deadline)
        author, _, why = out.partition("\x1f")
        return why.strip(), author.strip()

    def _repo(self) -> git.Repo:
        if (self._git_dir / "HEAD").exists():
            _clear_leftovers(self._git_dir)
            try:
                return git.Repo(self._git_dir)
            except Exception as err:  # gitpython raises its own, configparser's and OS errors alike
                raise errors.SourceError(
                    f"the cache repository {self._git_dir} is unreadable: {err}", where=self.where
                ) from err
        self._git_dir.parent.mkdir(parents=True, exist_ok=True)
        partial = self._git_dir.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        git.Repo.init(partial, bare=True)
        partial.replace(self._git_dir)
        return git.Repo(self._git_dir)

    def _fetch(self, repo: git.Repo, *, env: dict[str, str], deadline: float, stop: threading.Event) -> None:
        refspec = f"+{self.ref or 'HEAD'}:{TARGET}"
        args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head"]
        if self._shallow:
            try:
                self._run_fetch(
                    repo, [*args, "--depth=1", "--", self.url, refspec], env=env, deadline=deadline, stop=stop
                )
                return
            except errors.SourceError as err:
                if "does not support shallow" not in err.what:
                    raise
                logger.info("%s: the server does not support shallow fetches; fetching the full history", self.where)
                self._shallow = False
        self._run_fetch(repo, [*args, "--", self.url, refspec], env=env, deadline=deadline, stop=stop)

    def _run_fetch(
        self, repo: git.Repo, args: list[str], *, env: dict[str, str], deadline: float, stop: threading.Event
    ) -> None:
        objects = self._git_dir / "objects" / "pack"
        before = _size(objects)
        command = [git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git", *_CONFIG, *args]
        # gitpython's AutoInterrupt kills the process when collected: keep it until the process is done.
        handle = repo.git.execute(command, as_process=True, env=env, start_new_session=True)
        proc = handle.proc
        assert proc is not None, "gitpython returns a started process"
        why = ""
        try:
            while True:
                try:
                    _, stderr = proc.communicate(timeout=_POLL)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if stop.is_set():
                    why = "cancelled"
                elif time.monotonic() > deadline:
                    why = "timeout"
                elif self.max_bytes is not None and _size(objects) - before > self.max_bytes:
                    why = "too-large"
                if why:
                    _kill_group(proc)
                    _, stderr = proc.communicate()
                    break
        finally:
            if proc.poll() is None:
                _kill_group(proc)
                proc.wait()
            del handle
        if why == "timeout":
            raise errors.Unreachable(
                f"git fetch did not finish within {self.timeout:g} s", where=self.where, hint=_TIMEOUT_HINT
            )
        if why == "cancelled":
            raise errors.SourceError("git fetch was cancelled", where=self.where)
        if why != "too-large" and proc.returncode != 0:
            raise self._error(stderr.decode(errors="replace"), verb="fetch")
        if why == "too-large" or (self.max_bytes is not None and _size(objects) - before > self.max_bytes):
            # Drop the whole cache repository: what it holds now is over the limit, and a
            # killed fetch leaves partial packs behind. The next sync starts from scratch.
            shutil.rmtree(self._git_dir, ignore_errors=True)
            raise errors.TooLarge(
                f"the fetch brought more than the limit of {self.max_bytes} bytes"
                + ("; it was stopped" if why else ""),
                where=self.where,
                hint="raise the source's max_bytes, or keep large files out of the fleet repository",
            )

    def _git(self, repo: git.Repo, args: list[str], *, deadline: float, env: dict[str, str] | None = None) -> str:
        left = deadline - time.monotonic()
        if left <= 0:
            raise errors.Unreachable(
                f"git did not finish within {self.timeout:g} s", where=self.where, hint=_TIMEOUT_HINT
            )
        try:
            out: str = repo.git.execute(
                [git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git", *_CONFIG, *args], env=env, kill_after_timeout=left
            )
        except git.GitCommandError as err:
            raise self._error(str(err.stderr), verb=args[0]) from None
        return out

    def _checkout(self, repo: git.Repo, *, sha: str, deadline: float) -> Path:
        final = self._checkouts / sha
        if final.is_dir() and self._index(sha).exists():
            os.utime(final)
            return final
        if self.max_bytes is not None:
            size = _tree_size(self._git(repo, ["ls-tree", "-r", "-l", "--full-tree", sha], deadline=deadline))
            if size > self.max_bytes:
                raise errors.TooLarge(
                    f"commit {sha[:12]} checks out {size} bytes, over the limit of {self.max_bytes}",
                    where=self.where,
                    hint="raise the source's max_bytes, or keep large files out of the fleet repository",
                )
        self._index(sha).parent.mkdir(parents=True, exist_ok=True)
        for stale in self._checkouts.glob("*.partial"):
            shutil.rmtree(stale, ignore_errors=True)
        for stale in self._checkouts.glob(".index/*.partial"):
            stale.unlink(missing_ok=True)
        partial = self._checkouts / f"{sha}.partial"
        index = self._index(f"{sha}.partial")
        index.unlink(missing_ok=True)
        done = self._done()
        spares = self._spares()
        if len(done) >= self.keep:
            # Recycle the oldest checkout: renamed away first (its readers fail, never read the
            # wrong revision), then updated in place, writing only the files that differ.
            oldest = done[-1]
            oldest.replace(partial)
            self._index(oldest.name).replace(index)
        elif spares:
            spares[0].replace(partial)  # a spare is recycled the same way: no reader has it
            self._index(spares[0].name).replace(index)
        else:
            partial.mkdir()
        env = {"GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(partial)}
        try:
            self._git(repo, ["read-tree", "-u", "--reset", sha], deadline=deadline, env=env)
            index.replace(self._index(sha))
            partial.replace(final)
        finally:
            index.unlink(missing_ok=True)
            shutil.rmtree(partial, ignore_errors=True)
        return final

    def _index(self, name: str) -> Path:
        return self._checkouts / ".index" / name

    def _done(self) -> list[Path]:
        """Complete checkouts (a SHA-named directory with its index), newest first."""
        found = [p for p in self._checkouts.iterdir() if _is_sha(p.name) and self._index(p.name).exists()]
        found.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        return found

    def _spares(self) -> list[Path]:
        """Complete spare checkouts (``spare-<n>`` with its index), to be recycled before any is written afresh."""
        found = [p for p in self._checkouts.glob("spare-*") if p.is_dir() and self._index(p.name).exists()]
        return sorted(p for p in found if not p.name.endswith(".partial"))

    def _prepare_spare(self, *, deadline: float) -> None:
        """Write one spare checkout of the newest revision if fewer than ``keep`` directories exist."""
        done = self._done() if self._checkouts.is_dir() else []
        spares = self._spares() if done else []
        if not done or len(done) + len(spares) >= self.keep or not (self._git_dir / "HEAD").exists():
            return  # (no cache repository: a failed fetch removed it; the next sync clones again)
        taken = {p.name for p in spares}
        name = next(f"spare-{n}" for n in range(self.keep + 1) if f"spare-{n}" not in taken)
        partial, index = self._checkouts / f"{name}.partial", self._index(f"{name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        index.unlink(missing_ok=True)
        partial.mkdir()
        env = {"GIT_INDEX_FILE": str(index), "GIT_WORK_TREE": str(partial)}
        try:
            self._git(git.Repo(self._git_dir), ["read-tree", "-u", "--reset", done[0].name], deadline=deadline, env=env)
            index.replace(self._index(name))
            partial.replace(self._checkouts / name)
        except (errors.SourceError, git.GitError, OSError) as err:
            logger.warning("%s: preparing a spare checkout failed (next sync writes one afresh): %s", self.where, err)
        finally:
            index.unlink(missing_ok=True)
            shutil.rmtree(partial, ignore_errors=True)

    def _collect(self, *, deadline: float) -> None:
        """Repack and drop what the followed commit no longer reaches, once packs pile up."""
        if len(list((self._git_dir / "objects" / "pack").glob("*.pack"))) <= PACK_LIMIT:
            return
        try:
            self._git(git.Repo(self._git_dir), ["gc", "--quiet", "--prune=now"], deadline=deadline)
        except errors.SourceError as err:
            logger.warning("%s: git gc in the cache repository failed (next sync tries again): %s", self.where, err)

    def _forget_old(self, *, current: str) -> None:
        for old in [p for p in self._done() if p.name != current][self.keep - 1 :]:
            self._index(old.name).unlink(missing_ok=True)
            shutil.rmtree(old, ignore_errors=True)

    def _error(self, stderr: str, *, verb: str) -> errors.SourceError:
        text = creds.scrub(stderr.strip(), secrets=creds.secrets(self.credentials))
        text = text.replace(self.url, self.where)
        lines = [line.removeprefix("fatal: ").removeprefix("error: ") for line in text.splitlines() if line.strip()]
        what = f"git {verb} failed: " + ("; ".join(lines[-3:]) or "no message")
        lowered = text.lower()
        if "are too open" in lowered or "bad permissions" in lowered:
            return errors.Unauthorized(
                what,
                where=self.where,
                hint="ssh refuses a private key others may read: make the key file mode 0600 or stricter "
                "(or let a user other than the controller's own own it, readable through its group)",
            )
        if any(s in lowered for s in _UNAUTHORIZED):
            return errors.Unauthorized(
                what,
                where=self.where,
                hint="check the mounted token (or ssh key) is valid and has read access to the repository",
            )
        if "host key verification failed" in lowered:
            return errors.Unauthorized(
                what,
                where=self.where,
                hint="the server's host key is not in the known_hosts file: add the verified key line",
            )
        if "couldn't find remote ref" in lowered or ("remote branch" in lowered and "not found" in lowered):
            return errors.RefNotFound(
                f"the ref {self.ref or 'HEAD'!r} does not exist on the remote",
                where=self.where,
                hint="check the source's ref setting (a branch or tag name) against the remote",
            )
        if any(s in lowered for s in _TLS):
            return errors.Unreachable(
                what,
                where=self.where,
                hint="the server's TLS certificate is not trusted: mount its CA bundle and give it as the "
                "source's CA file (credentials.ca_file)",
            )
        if any(s in lowered for s in _UNREACHABLE):
            return errors.Unreachable(
                what, where=self.where, hint="check the URL and that the remote is reachable from the controller"
            )
        return errors.SourceError(
            what, where=self.where, hint="check the URL points at a git repository the controller may read"
        )


_UNAUTHORIZED = (
    "authentication failed",
    "could not read username",
    "could not read password",
    "terminal prompts disabled",
    "permission denied (publickey",
    "returned error: 401",
    "returned error: 403",
    "access denied",
)
_TLS = ("certificate verification failed", "ssl certificate problem", "certificate verify failed")
_UNREACHABLE = (
    "could not resolve",
    "connection refused",
    "failed to connect",
    "unable to connect",
    "timed out",
    "unable to access",
    "connection reset",
    "could not read from remote repository",
    "the remote end hung up",
)


def _ref(ref: str | None, *, url: str) -> str | None:
    if ref is None:
        return None
    if not ref or ref.startswith("-") or any(c in ref for c in ": \t\n~^?*[\\") or ".." in ref:
        raise errors.SourceError(
            f"{ref!r} is not a branch or tag name",
            where=urls.redact(url),
            hint="give a branch or tag name (main, v1.2) or a full ref (refs/heads/main)",
        )
    return ref


def _relative(path: str, *, url: str) -> str:
    pure = PurePosixPath(path.strip() or ".")
    if pure.is_absolute() or ".." in pure.parts:
        raise errors.SourceError(
            f"the source path {path!r} must be relative to the repository root and stay inside it",
            where=urls.redact(url),
            hint="give the fleet repository's directory relative to the git repository root, e.g. 'fleet'",
        )
    return "" if str(pure) == "." else str(pure)


def _size(directory: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _is_sha(name: str) -> bool:
    return len(name) in (40, 64) and all(c in "0123456789abcdef" for c in name)


def _clear_leftovers(git_dir: Path) -> None:
    """Lock files and partial packs of a git process that was killed (timeout, too large, restart).

    Only this source's own ``sync`` uses the cache repository, and never two at once, so
    any lock found here is stale; left in place it would fail every later fetch."""
    for pattern in ("*.lock", "refs/**/*.lock", "objects/pack/tmp_*", "objects/incoming-*"):
        for leftover in git_dir.glob(pattern):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def _tree_size(listing: str) -> int:
    total = 0
    for line in listing.splitlines():
        meta, _, _name = line.partition("\t")
        size = meta.split()[-1] if meta else "-"
        if size.isdigit():
            total += int(size)
    return total


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


__all__ = ["EMERGENCY_TRAILER", "TARGET", "Changed", "Checkout", "GitSource"]
