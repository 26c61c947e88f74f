"""Reading a checkout from disk: the one I/O edge of ``fleet.manifests``.

Everything else in this package is a pure function over file contents. This
module walks a repository directory and returns ``{relative path: bytes}``
for :func:`fleet.manifests.revisions.load_revision`, refusing what could make
a CI run read outside the repository or without bound: symlinks that resolve
outside the root, files over the size cap (not even read), more files than
the cap. Hidden files and directories (``.git``, ``.github``,
``.pre-commit-config.yaml``) are skipped: they belong to tools, not to the fleet.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from fleet.manifests.caches import TreeCache
from fleet.manifests.findings import Finding
from fleet.manifests.limits import Limits
from fleet.manifests.locations import Location

if TYPE_CHECKING:
    from fleet.manifests.revisions import Revision

SUFFIXES = (".yaml", ".yml")


def loadable(rel: str) -> bool:
    """Whether ``read_tree`` reads a file at this relative path: YAML, nothing hidden on the way."""
    return rel.endswith(SUFFIXES) and not any(part.startswith(".") for part in rel.split("/"))


def read_tree(root: Path, *, limits: Limits, cache: TreeCache | None = None) -> tuple[dict[str, bytes], list[Finding]]:
    """The YAML files under ``root`` and the findings about files not read.

    ``os.scandir`` rather than ``os.walk`` and ``pathlib``: a directory entry already
    knows whether it is a symlink or a directory, which saves two system calls and
    most of the Python work per file (a controller re-reads 10,000 files per poll).
    With a ``cache``, a file whose stat did not change is not read again (``TreeCache``),
    also when it comes back under another root (the git source's recycled checkouts).
    """
    root = root.resolve()
    files: dict[str, bytes] = {}
    findings: list[Finding] = []
    base = str(root)
    linked = False

    def walk(directory: str, rel_dir: str) -> bool:
        """Read ``directory``; False once the file cap is reached (stop everything)."""
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError:
            return True
        subdirs: list[os.DirEntry[str]] = []
        names: list[os.DirEntry[str]] = []
        for entry in entries:
            if entry.is_dir(follow_symlinks=True) and not entry.name.startswith("."):
                subdirs.append(entry)
            elif not entry.is_dir(follow_symlinks=True):
                names.append(entry)
        nonlocal linked
        for entry in [*subdirs, *names]:
            if not entry.is_symlink():
                continue
            linked = True
            if not _inside(Path(entry.path).resolve(), root):
                rel = rel_dir + entry.name
                findings.append(
                    Finding(
                        Location(rel),
                        "path-escape",
                        f"symlink {rel} points outside the repository",
                        hint="replace the symlink by the file it points to",
                    )
                )
        for entry in names:
            name = entry.name
            rel = rel_dir + name
            hidden = name.startswith(".")  # .pre-commit-config.yaml, .yamllint.yml: tools' files, not the fleet's
            if hidden or not name.endswith(SUFFIXES):
                continue
            if entry.is_symlink() and not _inside(Path(entry.path).resolve(), root):
                continue
            if len(files) >= limits.max_files:
                findings.append(
                    Finding(
                        Location(rel),
                        "file-too-large",
                        f"more than {limits.max_files} YAML files",
                        hint="split the repository",
                    )
                )
                return False
            try:
                st = entry.stat()
            except OSError:
                continue  # a dangling symlink
            size = st.st_size
            if size > limits.max_file_bytes:
                findings.append(
                    Finding(
                        Location(rel),
                        "file-too-large",
                        f"file is {size} bytes, over the {limits.max_file_bytes}-byte cap",
                        hint="split it into smaller files; fleet manifests are small",
                    )
                )
                continue
            stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev)
            content = cache.get(stamp) if cache is not None else None
            if content is None:
                with open(entry.path, "rb") as handle:
                    content = _read_capped(handle, size, limits.max_file_bytes)
                if cache is not None:
                    cache.put(stamp, content)
            files[rel] = content
        for entry in subdirs:
            if entry.is_symlink():
                continue  # not followed (as os.walk): it is reported above when it leaves the repository
            if not walk(entry.path, rel_dir + entry.name + "/"):
                return False
        return True

    walk(base, "")
    if cache is not None:
        cache.linked = linked
        cache.sweep()
    return files, findings


def read_changed(
    root: Path, *, files: Mapping[str, bytes], paths: Iterable[str], limits: Limits
) -> dict[str, bytes] | None:
    """What ``read_tree`` would read now, from what it read at an earlier commit (``files``) and the
    paths git says changed since (``paths``): only those are read again. None where only a whole
    read can tell, with its findings: a changed path that is a symlink or a directory now, a file
    over the size cap, more files than the cap. The caller makes sure ``files`` held no symlink's
    content (``TreeCache.linked``): a link's target can change while the link does not."""
    base = str(root.resolve())
    out = dict(files)
    for rel in paths:
        if not loadable(rel):
            continue
        path = os.path.join(base, rel)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            out.pop(rel, None)
            continue
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size > limits.max_file_bytes:
            return None
        try:
            with open(path, "rb") as handle:
                out[rel] = _read_capped(handle, st.st_size, limits.max_file_bytes)
        except OSError:
            return None
    return out if len(out) <= limits.max_files else None


def read_revision(root: Path, *, limits: Limits | None = None) -> Revision:
    """Read and load the repository checked out at ``root``."""
    limits = limits or Limits()
    files, findings = read_tree(root, limits=limits)
    from fleet.manifests.revisions import load_revision  # the models: not for a reader of bytes alone

    return load_revision(files, limits=limits, findings=tuple(findings))


def _read_capped(handle: BinaryIO, size: int, cap: int) -> bytes:
    """The file's bytes, at most ``cap + 1`` (the parser reports a file over the cap).

    Sized by the ``stat`` just made: ``read(n)`` allocates ``n`` bytes before it reads, and
    glibc serves a request of the cap's size (1 MiB) with a mapping of its own, which keeps
    at least a page after the bytes object shrinks to the file's length: for every small file
    the controller's ``TreeCache`` keeps, for as long as it runs. A file that grew since the ``stat``
    is read on, up to the cap.
    """
    content = handle.read(size + 1)
    if len(content) > size:
        content += handle.read(cap + 1 - len(content))
    return content


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


__all__ = ["SUFFIXES", "loadable", "read_changed", "read_revision", "read_tree"]
