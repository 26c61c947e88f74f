"""What this fleet is and what it is tested with: ``--version`` of both programs and ``fleet_build_info``.

kubectl, flux and argocd answer ``--version`` with their own version and commit and what
they support; an operator pasting it into a bug report should not have to find out more.

- **version**: the installed distribution's (``pyproject.toml``).
- **git commit**: an image has no ``.git``, so the Dockerfile writes its ``REVISION`` build
  argument (the same value as the ``org.opencontainers.image.revision`` label) into
  ``fleet/build.json`` before installing the package. A checkout (an editable install, or
  ``python -m`` in the work tree) has no such file and asks ``git rev-parse HEAD`` instead,
  once per process and only when asked. Anything else says ``unknown``.
- **tested with**: the Kubernetes and helm versions the sandbox builds and the NVIDIA
  gpu-operator chart it serves, as pinned in ``fleet/sandbox/versions.py``. That file imports
  nothing and is *read* with runpy, as ``tools/ktestenv/gomod.py`` reads it: importing
  ``fleet.sandbox`` would start the sandbox's modules, and the import layers keep the
  controller from them.

``VersionAction`` is the argparse action both parsers use; it computes the text only when
``--version`` is given, so no other command pays for the git call.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
BUILD_FILE = _HERE / "build.json"
"""Written by the image build (``{"revision": "<sha>"}``); absent in a checkout."""
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Build:
    version: str
    revision: str
    kubernetes: str
    helm: str
    gpu_operator: str

    def text(self, program: str) -> str:
        """The ``--version`` answer: three lines."""
        return (
            f"{program} {self.version}\n"
            f"git commit: {self.revision}\n"
            f"tested with: Kubernetes {self.kubernetes}, helm {self.helm}, "
            f"NVIDIA gpu-operator chart {self.gpu_operator}\n"
        )


@functools.cache
def current() -> Build:
    """This installation's build (computed once per process)."""
    import runpy  # only ``--version`` and the controller's build info ask

    try:
        pins = runpy.run_path(str(_HERE / "sandbox" / "versions.py"))
    except OSError:  # an installation without the sandbox's modules
        pins = {}
    return Build(
        version=_version(),
        revision=_revision(),
        kubernetes=str(pins.get("KUBERNETES", UNKNOWN)),
        helm=str(pins.get("HELM", UNKNOWN)),
        gpu_operator=str(pins.get("GPU_OPERATOR", UNKNOWN)),
    )


def _version() -> str:
    import importlib.metadata  # imported here: email, zipfile, ... that no other command needs

    try:
        return importlib.metadata.version("fleet")
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN


def _revision(*, build_file: Path = BUILD_FILE, checkout: Path = _HERE.parent) -> str:
    """The git commit: ``build_file``'s ``revision``, else ``checkout``'s HEAD when it is a git work tree."""
    try:
        recorded = json.loads(build_file.read_text())
    except (OSError, ValueError):
        recorded = None
    if isinstance(recorded, dict) and recorded.get("revision"):
        return str(recorded["revision"])
    if not (checkout / ".git").exists():
        return UNKNOWN
    try:
        found = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else UNKNOWN


class VersionAction(argparse.Action):
    """``--version``: print ``current().text(prog)`` to stdout and exit 0 (argparse's own action
    takes its text when the parser is built, which would run git for every command)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        kwargs.setdefault("help", "print the version, git commit and the versions fleet is tested with, then exit")
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print(current().text(parser.prog), end="")
        parser.exit(0)


__all__ = ["BUILD_FILE", "Build", "VersionAction", "current"]
