"""Where reconciles come from: webhooks (verified, or nothing happens), an unreachable remote,
and an idle controller that only watches (no LIST, counted on the API server).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from fleet import kube
from fleet.controller import caches, controllers, servers
from fleet.engine import ownership
from fleet.sandbox import Sandbox
from tests import servermetrics as server_metrics
from tests import waits
from tests.apply.repos import Repo
from tests.controller.conftest import Remote, running
from tests.controller.test_loop import condition, fleetsync, get

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.usefixtures("fleetsync_crd")]

SECRET = b"s3cret-for-tests"
RCT = "resource.k8s.io/v1"


@pytest.fixture()
def repo(tmp_path: Path) -> Repo:
    r = Repo(root=tmp_path / "unused")
    r.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    return r


def signed(body: bytes, secret: bytes) -> dict[str, str]:
    return {
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": hashlib.sha1(body + secret).hexdigest(),
        "X-Hub-Signature-256": "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }


async def _ready_at(client: kube.Client, cluster: str, revision: str) -> dict[str, Any] | None:
    obj = await fleetsync(client, cluster)
    ok = condition(obj, "Ready") == "True" and (obj.get("status") or {}).get("lastAppliedRevision") == revision
    return obj if ok else None


async def _settled(ctl: controllers.Controller, client: kube.Client) -> bool:
    """What the controller's own writes set off is over: the quota controller has filled in every
    ResourceQuota it made, its watches hold the server's version of every object it manages, and no
    reconcile is queued, running, or started meanwhile."""
    started = ctl.stats.reconciles
    if ctl.stats.finished != started or len(ctl.queue):
        return False
    cluster = ctl.options.cluster
    selector = f"{ownership.MANAGED_BY}={ownership.MANAGER},{ownership.CLUSTER_LABEL}={cluster}"
    for kind in ctl.cache.kinds:
        live = (await client.list(kind, label_selector=selector)).items
        if kind.kind == "ResourceQuota" and not all((o.get("status") or {}).get("hard") for o in live):
            return False
        cached = ctl.cache.objects[(kind.api_version, kind.kind)].values()
        if _versions(live) != _versions(o for o in cached if ownership.marked_for(o, cluster=cluster)):
            return False
    return ctl.stats.reconciles == ctl.stats.finished == started and not len(ctl.queue)


def _versions(objects: Iterable[dict[str, Any]]) -> dict[str, str]:
    return {kube.Ref.of(o).key: str(o["metadata"].get("resourceVersion")) for o in objects}


async def test_a_forged_webhook_is_refused_and_fetches_nothing_a_signed_one_applies_the_commit(
    sandbox: Sandbox, remote: Remote, repo: Repo, admin_client: kube.Client, tmp_path: Path
) -> None:
    first = remote.push(repo, message="a team")
    # An hour between polls: every fetch after the first one is the webhook's.
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache", interval=3600.0) as ctl:
        app = servers.build(
            metrics=ctl.metrics,
            ready=lambda: ctl.ready,
            on_push=lambda ref: ctl.poke(reason=f"push to {ref}"),
            secret=SECRET,
            ref="main",
        )
        async with anyio.create_task_group() as tg:
            port = await tg.start(functools.partial(servers.serve, app=app, host="127.0.0.1", port=0))
            url = f"http://127.0.0.1:{port}/webhook"
            await waits.eventually(
                lambda: _ready_at(admin_client, repo.cluster, first), what="Ready at the first commit"
            )
            fetches = ctl.stats.fetches

            repo.claim_template("ml", "single-gpu")
            second = remote.push(repo, message="ml: a claim template")
            body = json.dumps({"ref": "refs/heads/main", "after": second}).encode()
            async with httpx.AsyncClient(timeout=10) as http:
                forged = await http.post(url, content=body, headers=signed(body, b"not-the-secret"))
                unsigned = await http.post(url, content=body, headers={"X-GitHub-Event": "push"})
                gitlab = await http.post(
                    url, content=body, headers={"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "x"}
                )
                assert (forged.status_code, unsigned.status_code, gitlab.status_code) == (401, 401, 401)
                await anyio.sleep(1.0)
                assert ctl.stats.fetches == fetches, "a forged webhook made the controller fetch"
                assert await get(admin_client, RCT, "ResourceClaimTemplate", "single-gpu", repo.ns("ml")) is None

                accepted = await http.post(url, content=body, headers=signed(body, SECRET))
                assert accepted.status_code == 202, accepted.text
            await waits.eventually(
                lambda: get(admin_client, RCT, "ResourceClaimTemplate", "single-gpu", repo.ns("ml")),
                within=10,
                what="the template after a signed webhook",
            )
            assert ctl.stats.fetches == fetches + 1
            scraped = ctl.metrics.render()[0].decode()
            assert 'fleet_webhook_requests_total{result="unauthorized"} 3.0' in scraped
            tg.cancel_scope.cancel()


async def test_an_unreachable_remote_is_reported_the_last_good_state_stays_enforced_and_it_recovers(
    sandbox: Sandbox, remote: Remote, repo: Repo, admin_client: kube.Client, tmp_path: Path
) -> None:
    first = remote.push(repo, message="a team")
    ns = repo.ns("ml")
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache", interval=1.0):
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, first), what="Ready")
        moved = remote.bare.with_name("moved.git")
        remote.bare.rename(moved)

        async def unreachable() -> dict[str, Any] | None:
            obj = await fleetsync(admin_client, repo.cluster)
            status = obj.get("status") or {}
            return obj if status.get("sourceReachable") is False else None

        obj = await waits.eventually(unreachable, within=30, what="sourceReachable: false")
        assert obj["status"]["sourceError"]
        assert condition(obj, "Ready") == "False"
        assert [c["reason"] for c in obj["status"]["conditions"] if c["type"] == "Ready"] == ["SourceUnreachable"]

        # The last good revision is still enforced: a deleted RoleBinding comes back.
        sandbox.kubectl("delete", "rolebinding", "fleet-team-claims", "-n", ns)
        await waits.eventually(
            lambda: get(admin_client, "rbac.authorization.k8s.io/v1", "RoleBinding", "fleet-team-claims", ns),
            within=30,
            what="RoleBinding repaired while the remote is unreachable",
        )

        moved.rename(remote.bare)
        recovered = await waits.eventually(
            lambda: _ready_at(admin_client, repo.cluster, first), within=30, what="recovery"
        )
        assert recovered["status"]["sourceReachable"] is True and not recovered["status"]["sourceError"]


async def test_an_idle_controller_only_watches(
    sandbox: Sandbox, remote: Remote, repo: Repo, admin_client: kube.Client, tmp_path: Path
) -> None:
    repo.claim_template("ml", "single-gpu")
    first = remote.push(repo, message="a team and a template")
    async with running(sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache", interval=1.0) as ctl:
        await waits.eventually(lambda: _ready_at(admin_client, repo.cluster, first), what="Ready")
        await waits.eventually(lambda: _settled(ctl, admin_client), within=60, what="its own writes' events settled")
        client_before = dict(ctl.client.counts.by_verb)
        reconciles = ctl.stats.reconciles
        server_before = server_metrics.request_totals(await admin_client.metrics())
        await anyio.sleep(10.0)
        server_after = server_metrics.request_totals(await admin_client.metrics())
        sent = {
            verb: n - client_before.get(verb, 0)
            for verb, n in ctl.client.counts.by_verb.items()
            if n != client_before.get(verb, 0)
        }
        # The server's counter has no user label and the sandbox's controller-manager and
        # scheduler relist their own informers now and then (a LIST of services was seen in
        # CI), so count only the resources this controller reads.
        ours = {k.plural for k in caches.watched_kinds()} | {"configmaps", "leases"}
        lists = {
            k: n - server_before.get(k, 0)
            for k, n in server_after.items()
            if k[0] == "LIST" and k[1] in ours and n != server_before.get(k, 0)
        }
        assert sent == {}, f"an idle controller sent {sent}"
        assert ctl.stats.reconciles == reconciles
        assert ctl.stats.fetches > 5  # it kept polling git meanwhile
        assert lists == {}, f"the API server counted LIST requests while the controller was idle: {lists}"
