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
    """The YAML files under ``root`` and the findings about files not read."""
    root = root.resolve()
    files: dict[str, bytes] = {}
    findings: list[Finding] = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(directory)
        for name in [*dirnames, *filenames]:
            path = here / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink() and not _inside(path.resolve(), root):
                findings.append(
                    Finding(
                        Location(rel),
                        "path-escape",
                        f"symlink {rel} points outside the repository",
                        hint="replace the symlink by the file it points to",
                    )
                )
                if name in dirnames:
                    dirnames.remove(name)
        for name in sorted(filenames):
            path = here / name
            rel = path.relative_to(root).as_posix()
            hidden = name.startswith(".")  # .pre-commit-config.yaml, .yamllint.yml: tools' files, not the fleet's
            if hidden or not name.endswith(SUFFIXES) or (path.is_symlink() and not _inside(path.resolve(), root)):
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
                return files, findings
            size = path.stat().st_size
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
            with path.open("rb") as handle:
                files[rel] = handle.read(limits.max_file_bytes + 1)
    return files, findings


def read_revision(root: Path, *, limits: Limits | None = None) -> Revision:
    """Read and load the repository checked out at ``root``."""
    limits = limits or Limits()
    files, findings = read_tree(root, limits=limits)
    return load_revision(files, limits=limits, findings=tuple(findings))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


__all__ = ["SUFFIXES", "loadable", "read_revision", "read_tree"]
