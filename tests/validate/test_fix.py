"""``fleetctl validate --fix``: old DRA versions become v1 with comments and layout kept, idempotently.

The fixed files validate cleanly, keep every comment byte for byte, a second run
changes nothing, ``--diff`` writes nothing — and on the sandbox the fixed template
is stored exactly as the hand-written v1 one is.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.manifests import fixes
from tests.manifests.repos import EXAMPLE
from tests.validate.test_cli import fleetctl

V1BETA1 = """\
# yaml-language-server: $schema=../../../../schemas/resourceclaimtemplate.schema.json
# Copied from a DRA example written for Kubernetes 1.32 (resource.k8s.io/v1beta1).
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata:
  name: old-two-gpus
  namespace: ml-research   # the team's namespace
  labels:
    pinned: yes   # YAML 1.1 reads this as a boolean
spec:
  spec:
    devices:
      requests:
        - name: gpus   # both on one node
          deviceClassName: gpu.nvidia.com  # the GPU Operator's class
          count: 2
          selectors:
            # any Hopper, by the bus id the old driver published
            - cel:
                expression: "device.attributes['gpu.nvidia.com'].pcieBusID.startsWith('0000') || true"
"""
V1BETA2 = """\
# v1beta2 already has exactly:, only the version changes
apiVersion: resource.k8s.io/v1beta2
kind: ResourceClaimTemplate
metadata:
  name: old-large-memory
  namespace: ml-research
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: |
                device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity("40Gi"))
"""
HAND_WRITTEN_V1 = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: old-two-gpus
  namespace: ml-research
  labels:
    pinned: "yes"
spec:
  spec:
    devices:
      requests:
        - name: gpus
          exactly:
            deviceClassName: gpu.nvidia.com
            count: 2
            selectors:
              - cel:
                  expression: "device.attributes['resource.kubernetes.io'].pciBusID.startsWith('0000') || true"
"""
FILES = {"old-two-gpus.yaml": V1BETA1, "old-large-memory.yaml": V1BETA2}


def comments(text: str) -> list[str]:
    return [match.group(0) for match in re.finditer(r"#[^\n]*", text)]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    shutil.copytree(EXAMPLE, target)
    for name, text in FILES.items():
        (target / "teams" / "ml-research" / name).write_text(text)
    return target


def test_old_versions_are_findings_before_the_fix(repo: Path) -> None:
    result = fleetctl("validate", str(repo), "-o", "json")
    rules = sorted({f["rule"] for f in json.loads(result.stdout)["findings"]})
    assert result.returncode == 1
    assert rules == ["cel-removed-attribute", "deprecated-api", "yaml-ambiguous"]  # checked in its v1 shape too


def test_fix_rewrites_to_v1_keeps_comments_and_validates_cleanly(repo: Path) -> None:
    result = fleetctl("validate", str(repo), "--fix")
    assert result.returncode == 0, result.stdout + result.stderr
    folder = repo / "teams" / "ml-research"
    assert f"{folder}/old-two-gpus.yaml:3 fixed: apiVersion resource.k8s.io/v1beta1 → resource.k8s.io/v1" in (
        result.stdout
    )
    assert "old-two-gpus.yaml:15 fixed: requests[0]: deviceClassName, count, selectors moved under exactly:" in (
        result.stdout
    )
    assert "old-two-gpus.yaml:9 fixed: yes quoted" in result.stdout
    assert "→ resource.kubernetes.io/pciBusID" in result.stdout
    assert "old-large-memory.yaml:2 fixed: apiVersion resource.k8s.io/v1beta2 → resource.k8s.io/v1" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("0 error(s), 0 warning(s)")
    for name, original in FILES.items():
        fixed = (folder / name).read_text()
        assert comments(fixed) == comments(original), name  # every comment, byte for byte, in order
    fixed = yaml.safe_load((folder / "old-two-gpus.yaml").read_text())
    assert fixed == yaml.safe_load(HAND_WRITTEN_V1)
    v1beta2 = (folder / "old-large-memory.yaml").read_text()
    assert v1beta2 == V1BETA2.replace("resource.k8s.io/v1beta2", "resource.k8s.io/v1")  # only the version


def test_fix_is_idempotent_and_diff_writes_nothing(repo: Path) -> None:
    folder = repo / "teams" / "ml-research"
    preview = fleetctl("validate", str(repo), "--fix", "--diff")
    assert "-apiVersion: resource.k8s.io/v1beta1" in preview.stdout
    assert "+apiVersion: resource.k8s.io/v1" in preview.stdout
    assert (folder / "old-two-gpus.yaml").read_text() == V1BETA1
    fleetctl("validate", str(repo), "--fix")
    once = {name: (folder / name).read_text() for name in FILES}
    again = fleetctl("validate", str(repo), "--fix")
    assert "fixed:" not in again.stdout
    assert {name: (folder / name).read_text() for name in FILES} == once


def test_fix_text_leaves_clean_files_untouched() -> None:
    for path in EXAMPLE.rglob("*.yaml"):
        text = path.read_text()
        assert fixes.fix_text(text) == (text, []), path


@pytest.mark.sandbox
def test_fixed_and_hand_written_v1_are_stored_alike(repo: Path, kubectl: Callable[..., Any], namespace: str) -> None:
    fleetctl("validate", str(repo), "--fix")
    stored = []
    for name, text in (
        ("fixed", (repo / "teams" / "ml-research" / "old-two-gpus.yaml").read_text()),
        ("hand", HAND_WRITTEN_V1),
    ):
        body = yaml.safe_load(text)
        body["metadata"].update(name=name, namespace=namespace)
        kubectl("create", "-f", "-", stdin=json.dumps(body))
        got = json.loads(kubectl("get", "resourceclaimtemplate", name, "-n", namespace, "-o", "json").stdout)
        stored.append((got["spec"], got["metadata"].get("labels")))
    assert stored[0] == stored[1]
