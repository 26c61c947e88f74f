"""Resuming is keyed by content: a killed run of one edit never lets another edit skip stages."""

from __future__ import annotations

import subprocess

import pytest

from fleet import engine, kube
from fleet.engine import renders
from tests.apply.conftest import Engine, run_until_killed
from tests.apply.repos import Repo

pytestmark = pytest.mark.sandbox


def git(repo: Repo, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    done = subprocess.run(["git", "-C", str(repo.root), *args], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


def test_resume_after_a_content_change_of_a_dirty_tree_runs_every_stage(fleet: Engine, repo: Repo) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=2)
    repo.claim_template("ml", "one-gpu")
    repo.write()
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    sha = git(repo, "rev-parse", "HEAD")

    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)  # uncommitted edit 1
    first = fleet.plan()
    assert first.revision.startswith(f"{sha}-dirty-")

    fleet.run(lambda c: run_until_killed(c, first, before="pools"))

    repo.team("ml", namespaces=["ml"], group="ml-research", quota=6)  # uncommitted edit 2, same commit
    second = fleet.plan()
    assert second.revision.startswith(f"{sha}-dirty-") and second.revision != first.revision
    changes = fleet.run(lambda c: engine.reconcile(client=c, plan=second, options=engine.Options(health_timeout=30)))
    assert {e.stage for e in changes.entries} >= {"namespaces", "classes", "tenancy", "claims"}, "no stage skipped"
    quota = kube.Ref("v1", "ResourceQuota", repo.ns("ml"), renders.QUOTA_NAME)
    assert next(e for e in changes.entries if e.ref == quota).action == engine.Action.CONFIGURED
    key = f"{repo.device_class_name}.deviceclass.resource.k8s.io/devices"
    assert fleet.run(lambda c: c.get(quota))["spec"]["hard"][key] == "6"
