"""The controller refuses every hostile pull request of the corpus with zero change to the cluster.

The controller (``fleet.controller``, in-process through ``tests.controller.conftest.running``)
follows a real git remote holding ``examples/fleet``; its good revision is applied to the
sandbox for cluster ``gpu-east`` first. The test sandbox's simulated nodes are not the ones
the example's pools declare (pool ``a100`` expects 4 nodes, the default sandbox has 2), so
that apply stops at a health gate (``health_timeout`` 1 s here) and is retried: what fleet
wrote before the gate stays, the revision is enforced and every retry finds it unchanged (no
write). Then, for each PR: the PR is pushed as a commit
(``git apply`` of its diff, symlinks and binaries included), the controller is poked and must
go ``Stalled`` at that commit with findings that are exactly what ``fleetctl validate``
expects for the cluster (rule, file and line, from the corpus's ``Expect:`` lines); then the
PR is reverted (the base content pushed again) and the controller must be Ready again.
Meanwhile nothing of the cluster changes: every resourceVersion of fleet's objects
(namespaces, classes, roles, bindings, quotas, templates, Nodes) is compared before and after
each PR, and the API server's own write counters (``apiserver_request_total``) show no write
to a resource fleet manages.

The example's two clusters declare the same namespaces, so only one of them can live in the
one sandbox: the PRs that break only ``gpu-west`` (its overlay) are checked by a
``gpu-west`` controller that starts at the PR commit, with nothing applied by it before.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from fleet import kube
from fleet.engine import ownership, stages
from fleet.sandbox import Sandbox
from tests import servermetrics as metrics
from tests import waits
from tests.controller.conftest import Remote, fleetsync_crd, git, running
from tests.controller.test_loop import condition, fleetsync
from tests.hostile_prs.corpus import PullRequest, pull_requests
from tests.manifests.repos import EXAMPLE

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.slow, pytest.mark.usefixtures("fleetsync_crd")]

__all__ = ["fleetsync_crd"]  # the fixture, used through pytestmark

WEST = "overlays/gpu-west/"
KINDS = "namespaces,roles,rolebindings,resourcequotas,deviceclasses,resourceclaimtemplates,nodes"


def _west_only(pr: PullRequest) -> bool:
    return all(e.file.startswith(WEST) for e in pr.expected)


def _expected(pr: PullRequest, cluster: str) -> set[tuple[str, str, int]]:
    """What validate expects that concerns ``cluster``: the other cluster's overlay is not its business.

    A symlink escaping the repository is ``path-escape`` in a work tree; the git source checks
    symlinks out as plain files holding their target (``core.symlinks=false``, it never follows
    one), so the controller sees a file whose text is a path: ``schema`` at its line 1."""
    other = WEST if cluster == "gpu-east" else "overlays/gpu-east/"
    return {
        ("schema", e.file, 1) if e.rule == "path-escape" else (e.rule, e.file, e.line)
        for e in pr.expected
        if not e.file.startswith(other)
    }


def _found(obj: dict[str, Any]) -> set[tuple[str, str, int]]:
    out = set()
    for f in (obj.get("status") or {}).get("findings") or ():
        file, _, rest = f["location"].partition(":")
        out.add((f["rule"], file, int(rest.split(":")[0] or 0)))
    return out


def _versions(sandbox: Sandbox) -> dict[str, str]:
    """resourceVersion of every object carrying fleet's labels (any cluster); each Node's labels and
    taints (KWOK rewrites node status all the time, so a Node's resourceVersion moves on its own)."""
    items = json.loads(sandbox.kubectl("get", KINDS, "-A", "-o", "json").stdout)["items"]
    out = {}
    for o in items:
        meta = o["metadata"]
        key = f"{o['kind']}/{meta.get('namespace', '')}/{meta['name']}"
        if o["kind"] == "Node":
            out[key] = json.dumps([meta.get("labels"), (o.get("spec") or {}).get("taints")], sort_keys=True)
        elif (meta.get("labels") or {}).get(ownership.MANAGED_BY) == ownership.MANAGER:
            out[key] = meta["resourceVersion"]
    return out


def _base(work: Path) -> None:
    for child in work.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    shutil.copytree(EXAMPLE, work, symlinks=True, dirs_exist_ok=True)


def _commit(remote: Remote, message: str, *, pr: PullRequest | None = None) -> str:
    _base(remote.work)
    if pr is not None:
        subprocess.run(
            ["git", "apply", "--binary", str(pr.path)], cwd=remote.work, check=True, capture_output=True, timeout=60
        )
    git(remote.work, "add", "-A")
    git(remote.work, "commit", "-q", "--allow-empty", "-m", message)
    git(remote.work, "push", "-q", "origin", "main")
    return git(remote.work, "rev-parse", "HEAD")


async def _at(client: kube.Client, cluster: str, revision: str, kind: str) -> dict[str, Any] | None:
    obj = await fleetsync(client, cluster)
    status = obj.get("status") or {}
    ok = status.get("lastAttemptedRevision") == revision and condition(obj, kind) == "True"
    return obj if ok else None


async def _applied(client: kube.Client, revision: str) -> dict[str, Any] | None:
    """``revision`` is enforced and its reconcile over (Ready or not: see the module docstring)."""
    obj = await fleetsync(client, "gpu-east")
    status = obj.get("status") or {}
    done = status.get("enforcedRevision") == revision and condition(obj, "Reconciling") == "False"
    done = done and status.get("lastAttemptedRevision") == revision and condition(obj, "Stalled") == "False"
    return obj if done else None


async def _settled(sandbox: Sandbox, *, within: float = 120.0) -> dict[str, str]:
    """fleet's objects once nothing changes them for 2 s (the sandbox's controllers finish their own writes)."""
    with anyio.fail_after(within):
        before = _versions(sandbox)
        while True:
            await anyio.sleep(2.0)
            after = _versions(sandbox)
            if after == before:
                return after
            before = after


async def test_the_controller_refuses_every_hostile_pr_with_zero_change(
    sandbox: Sandbox, admin_client: kube.Client, tmp_path: Path
) -> None:
    remote = Remote(tmp_path / "git")
    prs = pull_requests()
    east = [pr for pr in prs if not _west_only(pr)]
    west = [pr for pr in prs if _west_only(pr)]
    base = _commit(remote, "the example fleet")
    timings: list[float] = []
    async with running(
        sandbox, remote, cluster="gpu-east", cache_dir=tmp_path / "east", interval=3600.0, health_timeout=1.0
    ) as ctl:
        await waits.eventually(lambda: _applied(admin_client, base), within=180, what="the example applied")
        versions = await _settled(sandbox)
        good = base
        counters = metrics.request_totals(await admin_client.metrics())
        for pr in east:
            started = anyio.current_time()
            bad = _commit(remote, f"hostile PR: {pr.subject}", pr=pr)
            ctl.poke(reason=pr.name)
            obj = await waits.eventually(
                lambda bad=bad: _at(admin_client, "gpu-east", bad, "Stalled"), within=60, what=f"{pr.name} refused"
            )
            status = obj["status"]
            assert status["enforcedRevision"] == good, pr.name
            assert condition(obj, "Ready") == "False", pr.name
            assert _found(obj) == _expected(pr, "gpu-east"), f"{pr.name}: {status['findings']}"
            assert _versions(sandbox) == versions, f"{pr.name} changed the cluster"

            revert = _commit(remote, f"Revert: {pr.subject}")
            ctl.poke(reason=f"revert {pr.name}")
            await waits.eventually(
                lambda revert=revert: _applied(admin_client, revert),
                within=60,
                what=f"the revert of {pr.name} enforced",
            )
            good = revert
            assert _versions(sandbox) == versions, f"reverting {pr.name} changed the cluster"
            timings.append(anyio.current_time() - started)
        after = metrics.request_totals(await admin_client.metrics())
        writes = metrics.writes(counters, after, resources=set(stages.WRITTEN_RESOURCES))
        which = {k: n - counters[k] for k, n in after.items() if n != counters[k] and k[0] in metrics.WRITE_VERBS}
        assert writes == 0, f"{writes} write(s) to fleet's resources reached the API server: {which}"
        assert ctl.stats.plans == 1 + 2 * len(east)
        assert len([k for k in versions if not k.startswith("Node/")]) >= 5, versions  # namespaces, classes

    for pr in west:
        bad = _commit(remote, f"hostile PR: {pr.subject}", pr=pr)
        async with running(
            sandbox, remote, cluster="gpu-west", cache_dir=tmp_path / f"west-{pr.name}", interval=3600.0
        ):
            obj = await waits.eventually(
                lambda bad=bad: _at(admin_client, "gpu-west", bad, "Stalled"), within=60, what=f"{pr.name} refused"
            )
            assert _found(obj) == _expected(pr, "gpu-west"), f"{pr.name}: {obj['status']['findings']}"
            assert not obj["status"]["lastAppliedRevision"]
        assert _versions(sandbox) == versions, f"{pr.name} changed the cluster"
    print(
        f"\n{len(east)} PRs refused by the gpu-east controller (pushed, refused, reverted: "
        f"{min(timings):.1f}-{max(timings):.1f} s each, {sum(timings):.0f} s in all), "
        f"{len(west)} by a gpu-west controller; 0 resourceVersions changed, 0 writes to fleet's resources"
    )
