"""The hostile pull-request corpus: each ``NN-name.diff`` is a PR against ``examples/fleet``.

A PR file is ``git diff --binary`` output behind a header that ``git apply`` skips::

    Subject: what the pull request tries
    Team: ml-research                 (escalations: the team whose owners would apply it)
    Expect: RULE FILE:LINE MESSAGE    (every error ``fleetctl validate`` must report, no more)

``tools/hostile_prs.py`` writes them; this module only reads them, so a test can never
agree with itself by regenerating its expectations.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.manifests.repos import EXAMPLE

CORPUS = Path(__file__).resolve().parent
EXPECT = re.compile(r"^Expect: (?P<rule>\S+) (?P<file>\S+):(?P<line>\d+) (?P<message>.*)$")
CHANGED = re.compile(r"^diff --git a/\S+ b/(?P<path>\S+)$")


@dataclass(frozen=True)
class Expectation:
    rule: str
    file: str
    line: int
    message: str


@dataclass(frozen=True)
class PullRequest:
    name: str
    path: Path
    subject: str
    team: str
    expected: tuple[Expectation, ...]
    changed: tuple[str, ...]

    def checkout(self, *, into: Path) -> Path:
        """A copy of the example repository with this PR applied (``git apply``, symlinks and binaries too)."""
        repo = into / self.name
        shutil.copytree(EXAMPLE, repo, symlinks=True)
        subprocess.run(["git", "apply", "--binary", str(self.path)], cwd=repo, check=True, capture_output=True)
        return repo


def pull_requests() -> list[PullRequest]:
    out = []
    for path in sorted(CORPUS.glob("*.diff")):
        text = path.read_bytes().decode("utf-8", "replace")
        head, _, body = text.partition("\ndiff --git ")
        fields = dict(
            line.split(": ", 1) for line in head.splitlines() if ": " in line and not line.startswith("Expect")
        )
        expected = tuple(
            Expectation(rule=m["rule"], file=m["file"], line=int(m["line"]), message=m["message"])
            for m in map(EXPECT.match, head.splitlines())
            if m
        )
        changed = tuple(m["path"] for m in map(CHANGED.match, ("diff --git " + body).splitlines()) if m)
        out.append(
            PullRequest(
                name=path.stem.split("-", 1)[1],
                path=path,
                subject=fields.get("Subject", ""),
                team=fields.get("Team", ""),
                expected=expected,
                changed=changed,
            )
        )
    return out
