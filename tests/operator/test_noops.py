"""An unchanged operator release costs no helm process in a process that reconciles again and again.

helm runs through a wrapper that logs each process it starts. The stage keeps ``operators.Noops``
between runs (the controller keeps one): after a run saw the release deployed as declared, the
next runs read helm's release record through the API and start no helm at all; a hand ``helm
upgrade`` (a new revision), or other values, are noticed and helm is asked again.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from fleet import engine, helm
from fleet.engine import operators
from fleet.sandbox import Sandbox, credentials
from fleet.sandbox.operators import StandInOperator
from tests.apply.conftest import Engine
from tests.operator.conftest import NAMESPACE, RELEASE, UPSTREAM
from tests.operator.repos import OperatorRepo

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("cleanup_release")]


def _counting(tmp_path: Path, real: Path) -> tuple[Path, Path]:
    calls, wrapper = tmp_path / "calls", tmp_path / "helm"
    calls.touch()
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, calls


def test_an_unchanged_release_starts_no_helm_until_something_changes(
    sandbox: Sandbox, tmp_path: Path, chart_repo: str, helm_settings: helm.Settings
) -> None:
    repo = OperatorRepo(root=tmp_path / "repo", chart_repo=chart_repo)
    repo.team("ml", namespaces=["ml"], group="ml")
    fleet = Engine(sandbox, repo)
    with StandInOperator(sandbox, upstream=UPSTREAM):
        fleet.apply(helm=helm_settings)
    wrapper, calls = _counting(tmp_path, helm_settings.binary)
    settings = dataclasses.replace(helm_settings, binary=wrapper)
    remembered = operators.Noops()

    def stage(*, dry_run: bool = False) -> tuple[engine.Action, int]:
        plan = fleet.plan()
        before = len(calls.read_text().splitlines())
        entries = fleet.run(
            lambda c: operators.Stage(
                client=c, h=helm.Helm(settings), plan=plan, remembered=remembered, detail=dry_run
            ).propose()
        )
        return entries[0].action, len(calls.read_text().splitlines()) - before

    first = stage()
    assert first[0] == engine.Action.UNCHANGED and first[1] > 0  # seen through helm once, then remembered
    assert stage() == (engine.Action.UNCHANGED, 0)
    assert stage() == (engine.Action.UNCHANGED, 0)

    # A hand upgrade writes revision 2: the remembered record is superseded, so helm is asked again.
    argv = [str(helm_settings.binary), "upgrade", RELEASE, "gpu-operator", "--repo", chart_repo, "--version", "v26.7.0"]
    argv += ["-n", NAMESPACE, "--reuse-values", "--kube-context", credentials.CLUSTER]
    argv += ["--kubeconfig", str(helm_settings.kubeconfig)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    again = stage()
    assert again[0] == engine.Action.UNCHANGED and again[1] > 0
    assert stage() == (engine.Action.UNCHANGED, 0)

    # Other values: another key, so helm is asked and the release is to change.
    repo.values = {**repo.values, "dcgmExporter": {"enabled": False}}
    changed = stage(dry_run=True)
    assert changed[0] == engine.Action.CONFIGURED and changed[1] > 0
