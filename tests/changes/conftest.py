"""Fixtures of the change-management tests: a team repository on the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.sandbox import Sandbox
from tests.apply.repos import Repo


@pytest.fixture()
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox) -> Repo:
    """Team ``ml`` with claim ``held`` and template ``one-gpu``; the CLI pointed at the sandbox, no colour."""
    repo = Repo(root=tmp_path / "repo")
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim("ml", "held")
    repo.claim_template("ml", "one-gpu")
    return repo
