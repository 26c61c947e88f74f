"""Plans kept on disk between runs, keyed by everything a plan is a function of.

A plan is a pure function of the repository's files, the cluster, the revision id and
fleet's own code (``fleet.engine.pipelines.check_and_plan``): the controller's in-memory
``LoadCache`` already reuses the last plan when all four are unchanged. A new process has
no memory, yet it is the common case: the next ``fleetctl diff`` of a checkout nobody
edited, ``fleetctl apply`` after ``diff``, a controller container restarted on an
unchanged revision. Loading is most of such a run, and unpickling a plan is a small
part of loading it (``bench/run noop``, docs/benchmarks.md). So a run stores the plan it
made, and a later run with the same key takes it back instead of parsing, validating and
planning again.

The key is a hash of the file names and contents, the cluster, the revision id and a
fingerprint of the code that made the plan: every fleet source file, the Python version
and the versions of the libraries that parse and validate (a changed parser may read the
same bytes differently). Only plans are stored: a revision that fails validation is
validated again every time, so its findings are always fresh.

The cache can only save time, never change an outcome or fail a run: an unreadable,
truncated or foreign entry is a miss (and is removed); a directory that cannot be written
is skipped. pickle runs code as it loads, so entries are read only from a directory the
user owns that nobody else may write (created 0700), and each entry is written to a
temporary file and renamed into place, so a reader never sees half of one. The newest
``KEEP`` entries are kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import pickle
import re
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fleet.engine import plans

KEEP = 4
"""Entries kept: a few checkouts or clusters in turn; a plan of a large fleet is large on disk."""

LIBRARIES = ("pydantic", "pydantic-core", "PyYAML", "ruamel.yaml", "cel-expr-python", "protobuf")
"""Distributions whose version is part of the key: they parse, validate and compile CEL."""

SUFFIX = ".plan"


def directory(given: str | None = None) -> Path | None:
    """``<given>/plans``, else ``$FLEET_CACHE_DIR/plans``, else ``$XDG_CACHE_HOME/fleet/plans``, else
    ``~/.cache/fleet/plans``. The empty string, given or in ``FLEET_CACHE_DIR``, turns the cache off (None)."""
    if given is None:
        given = os.environ.get("FLEET_CACHE_DIR")
    if given is not None:
        return Path(given) / "plans" if given else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fleet" / "plans"


@functools.cache
def code_fingerprint() -> bytes:
    """A hash of fleet's source files, the Python version and ``LIBRARIES``' versions (once per process)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(sys.version.encode())
    installed = _installed()
    for name in LIBRARIES:
        h.update(f"{name}=={installed.get(_canonical(name)) or _version(name)}\0".encode())
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.digest()


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _installed() -> dict[str, str]:
    """Distribution (canonical name) → version, from the ``NAME-VERSION.dist-info`` directories on
    ``sys.path``, the first found winning as in ``importlib.metadata``. Directory names only:
    importing ``importlib.metadata`` (email, zipfile, csv) and reading each METADATA file are
    a measurable part of a process that takes a stored plan (docs/benchmarks.md)."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for item in names:
            if item.endswith(".dist-info") and "-" in item:
                name, version = item[: -len(".dist-info")].rsplit("-", 1)
                found.setdefault(_canonical(name), version)
    return found


def _version(name: str) -> str:
    """``name``'s version from its metadata (installed some other way: an egg, a zip); "" when absent."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""


@dataclass(frozen=True)
class PlanCache:
    """A directory of pickled plans, each named by its key (``key``)."""

    directory: Path
    keep: int = KEEP

    @staticmethod
    def key(*, digest: bytes, cluster: str, revision: str, code: bytes | None = None) -> str:
        """The entry's name: ``digest`` (of the files' names and contents), cluster, revision and code."""
        h = hashlib.blake2b(digest_size=20)
        for part in (code if code is not None else code_fingerprint(), digest, cluster.encode(), revision.encode()):
            h.update(len(part).to_bytes(4, "big") + part)
        return h.hexdigest()

    def get(self, key: str) -> plans.Plan | None:
        """The plan stored under ``key``, or None: missing, unreadable, not a plan, or an unsafe directory."""
        if not self._trusted():
            return None
        path = self.directory / (key + SUFFIX)
        try:
            with path.open("rb") as handle:
                if os.fstat(handle.fileno()).st_uid != os.getuid():
                    return None
                found = _read(handle)
        except FileNotFoundError:
            return None
        except Exception:  # truncated, corrupt or from another fleet: a miss, and not kept
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        if not isinstance(found, plans.Plan):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: kept longest
        return found

    def put(self, key: str, plan: plans.Plan) -> bool:
        """Store ``plan`` under ``key`` and drop all but the newest ``keep`` entries; False if it could not."""
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self._trusted():
                return False
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=SUFFIX)
            try:
                with os.fdopen(fd, "wb") as handle:
                    _write(handle, plan)
                os.replace(tmp, self.directory / (key + SUFFIX))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except (OSError, pickle.PicklingError):
            return False
        self._evict()
        return True

    def _trusted(self) -> bool:
        """The directory exists, is the user's own and nobody else may write it."""
        try:
            st = self.directory.stat()
        except OSError:
            return False
        return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)

    def _evict(self) -> None:
        entries = []
        for path in self.directory.glob("*" + SUFFIX):
            with contextlib.suppress(OSError):
                entries.append((path.stat().st_mtime_ns, path))
        for _, path in sorted(entries, reverse=True)[self.keep :]:
            with contextlib.suppress(OSError):
                path.unlink()


BATCH = 1000
"""Desired objects per pickle frame. The controller stores each new plan from a worker thread,
and one ``pickle.dump`` is a single C call that holds the GIL throughout, a stall of the
event loop that renews the Lease. In frames of 1,000 (one
Pickler, so shared parts stay shared) the loop runs between frames."""


def _write(handle: BinaryIO, plan: plans.Plan) -> None:
    pickler = pickle.Pickler(handle, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dump((len(plan.objects), dataclasses.replace(plan, objects=())))
    for start in range(0, len(plan.objects), BATCH):
        pickler.dump(plan.objects[start : start + BATCH])


def _read(handle: BinaryIO) -> object:
    unpickler = pickle.Unpickler(handle)
    count, head = unpickler.load()
    if not isinstance(count, int) or not isinstance(head, plans.Plan):
        return None
    objects: list[plans.Desired] = []
    while len(objects) < count:
        objects.extend(unpickler.load())
    return dataclasses.replace(head, objects=tuple(objects))


__all__ = ["BATCH", "KEEP", "LIBRARIES", "PlanCache", "code_fingerprint", "directory"]
