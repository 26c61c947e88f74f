"""Test helpers: the example repository as a dict of files, and quick loaders."""

from __future__ import annotations

import textwrap
from pathlib import Path

from fleet.manifests import Finding, Limits, Revision, load_revision, read_tree
from tests import paths

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "fleet"
SEED = paths.SEED


def example_files() -> dict[str, bytes]:
    files, findings = read_tree(EXAMPLE, limits=Limits())
    assert not findings
    return files


def yaml(text: str) -> bytes:
    return textwrap.dedent(text).lstrip("\n").encode()


def load(files: dict[str, bytes]) -> Revision:
    return load_revision(files)


def rules(findings: list[Finding] | tuple[Finding, ...]) -> list[str]:
    return [f.rule for f in findings]


def only(findings: list[Finding] | tuple[Finding, ...], rule: str) -> Finding:
    matching = [f for f in findings if f.rule == rule]
    assert len(matching) == 1, [str(f) for f in findings]
    return matching[0]


def template(*, namespace: str = "ml-research", name: str = "t", request: str = "") -> bytes:
    """A ResourceClaimTemplate with one request ``gpu``; ``request`` adds fields under ``exactly``."""
    return (
        yaml(f"""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaimTemplate
        metadata:
          name: {name}
          namespace: {namespace}
        spec:
          spec:
            devices:
              requests:
              - name: gpu
                exactly:
                  deviceClassName: gpu.nvidia.com
    """)
        + textwrap.indent(textwrap.dedent(request).strip("\n"), " " * 10).encode()
        + b"\n"
    )


def position_of(text: bytes, needle: str) -> tuple[int, int]:
    """1-based (line, column) of the first ``needle`` in ``text``."""
    before = text.decode()[: text.decode().index(needle)]
    return before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
