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
from pathlib import Path

from fleet.manifests.findings import Finding
from fleet.manifests.limits import Limits
from fleet.manifests.locations import Location
from fleet.manifests.revisions import Revision, load_revision

SUFFIXES = (".yaml", ".yml")


def loadable(rel: str) -> bool:
    """Whether ``read_tree`` reads a file at this relative path: YAML, nothing hidden on the way."""
    return rel.endswith(SUFFIXES) and not any(part.startswith(".") for part in rel.split("/"))


def read_tree(root: Path, *, limits: Limits) -> tuple[dict[str, bytes], list[Finding]]:
    """The YAML files under ``root`` and the findings about files not read.

    ``os.scandir`` rather than ``os.walk`` + ``pathlib``: a directory entry already knows whether
    it is a symlink or a directory, and relative paths are joined as strings (10,000 files).
    Like ``os.walk``, symlinked directories inside the root are listed but not descended into.
    """
    root = root.resolve()
    files: dict[str, bytes] = {}
    findings: list[Finding] = []
    _read_directory(str(root), "", root=root, limits=limits, files=files, findings=findings)
    return files, findings


def _read_directory(
    directory: str, prefix: str, *, root: Path, limits: Limits, files: dict[str, bytes], findings: list[Finding]
) -> bool:
    """Read one directory (files first, then subdirectories in name order); False once the file cap is hit."""
    with os.scandir(directory) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    subdirectories = []
    for entry in entries:
        rel = prefix + entry.name
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_dir and entry.name.startswith("."):
            continue
        if entry.is_symlink() and not _inside(Path(entry.path).resolve(), root):
            findings.append(
                Finding(
                    Location(rel),
                    "path-escape",
                    f"symlink {rel} points outside the repository",
                    hint="replace the symlink by the file it points to",
                )
            )
            continue
        if is_dir:
            subdirectories.append(entry)
            continue
        hidden = entry.name.startswith(".")  # .pre-commit-config.yaml, .yamllint.yml: tools' files, not the fleet's
        if hidden or not entry.name.endswith(SUFFIXES) or entry.is_dir():
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
        size = entry.stat().st_size
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
        with open(entry.path, "rb") as handle:
            files[rel] = handle.read(limits.max_file_bytes + 1)
    for entry in subdirectories:
        if not _read_directory(
            entry.path, f"{prefix}{entry.name}/", root=root, limits=limits, files=files, findings=findings
        ):
            return False
    return True


def read_revision(root: Path, *, limits: Limits | None = None) -> Revision:
    """Read and load the repository checked out at ``root``."""
    limits = limits or Limits()
    files, findings = read_tree(root, limits=limits)
    return load_revision(files, limits=limits, findings=tuple(findings))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


__all__ = ["SUFFIXES", "loadable", "read_revision", "read_tree"]
