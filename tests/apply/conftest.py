"""Helpers for apply tests: plan a test repository and run the engine against the sandbox."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from fleet import engine, kube
from fleet.engine import blockers, stages
from fleet.engine.pipelines import load_plan
from fleet.sandbox import Sandbox, credentials
from tests import servermetrics as metrics
from tests import waits
from tests.apply.repos import Repo

T = TypeVar("T")
FLEET_RESOURCES = stages.WRITTEN_RESOURCES


class Engine:
    """Runs plan/diff/apply for a test repository against the sandbox as admin."""

    def __init__(self, sandbox: Sandbox, repo: Repo) -> None:
        self.sandbox = sandbox
        self.repo = repo
        self.last_client: kube.Client | None = None

    def run(self, fn: Callable[[kube.Client], Awaitable[T]], *, context: str = credentials.CLUSTER) -> T:
        async def main() -> T:
            client = await kube.connect(kubeconfig=str(self.sandbox.kubeconfig), context=context)
            self.last_client = client
            try:
                return await fn(client)
            finally:
                await client.close()

        return anyio.run(main)

    def plan(self) -> engine.Plan:
        return load_plan(self.repo.write(), cluster=self.repo.cluster)

    def apply(self, **options: Any) -> engine.ChangeSet:
        plan = self.plan()
        options.setdefault("health_timeout", 30.0)
        return self.run(lambda c: engine.reconcile(client=c, plan=plan, options=engine.Options(**options)))

    def diff(self, **options: Any) -> engine.ChangeSet:
        plan = self.plan()
        return self.run(lambda c: engine.diff(client=c, plan=plan, options=engine.Options(**options)))

    def server_writes(self, action: Callable[[], object]) -> int:
        """Writes the API server counted to fleet's resources while ``action`` ran.

        The counters are the server's, whoever writes: first wait until Kubernetes has put its
        own objects (``blockers.IMPLICIT``) into every namespace and no namespace is being
        emptied, or a busy kube-controller-manager's late writes count as the action's.
        """
        waits.wait_for(self._settled, what="every namespace has its ServiceAccount and root CA, none Terminating")
        before = self.run(lambda c: c.metrics())
        action()
        after = self.run(lambda c: c.metrics())
        return metrics.writes(metrics.request_totals(before), metrics.request_totals(after), resources=FLEET_RESOURCES)

    def _settled(self) -> bool:
        kinds = "namespaces,serviceaccounts,configmaps"
        listed = json.loads(self.sandbox.kubectl("get", kinds, "-A", "-o", "json").stdout)
        namespaces: set[str] = set()
        made: set[tuple[str, str]] = set()
        for item in listed["items"]:
            meta = item["metadata"]
            if item["kind"] == "Namespace":
                if item.get("status", {}).get("phase") != "Active":
                    return False
                namespaces.add(meta["name"])
            elif (item["kind"], meta["name"]) in blockers.IMPLICIT:
                made.add((meta["namespace"], item["kind"]))
        return all((ns, kind) in made for ns in namespaces for kind, _ in blockers.IMPLICIT)


@pytest.fixture()
def repo(tmp_path: Path) -> Repo:
    return Repo(root=tmp_path / "repo")


@pytest.fixture()
def fleet(sandbox: Sandbox, repo: Repo) -> Engine:
    return Engine(sandbox, repo)


class Killed(Exception):
    """Raised from a driver hook: the run ends there as if its process had been killed."""


def killed_before(step: str) -> engine.Hooks:
    """Hooks that end a run just before ``step`` (what was done stays done, as after a kill)."""

    def before(name: str) -> None:
        if name == step:
            raise Killed(step)

    return engine.Hooks(before_step=before)


async def run_until_killed(client: kube.Client, plan: engine.Plan, *, before: str, **options: Any) -> None:
    """Drive ``plan`` and kill the run just before step ``before``."""
    options.setdefault("health_timeout", 30.0)
    with pytest.raises(Killed):
        await engine.reconcile(client=client, plan=plan, options=engine.Options(**options), hooks=killed_before(before))


def actions(changes: engine.ChangeSet) -> dict[str, str]:
    """``Kind namespace/name`` → action, for compact assertions."""
    return {str(e.ref): str(e.action) for e in changes.entries}
