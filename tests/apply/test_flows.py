"""Create, no-op (zero writes, counted by the API server), change and prune on the real sandbox."""

from __future__ import annotations

import pytest

from fleet import engine, kube
from fleet.engine import ownership, previews
from fleet.errors import FleetError
from tests.apply.conftest import Engine, actions
from tests.apply.repos import Repo

pytestmark = pytest.mark.sandbox


def test_create_then_noop_makes_zero_writes(fleet: Engine, repo: Repo) -> None:
    # A quota the server stores in another spelling ("1M") must not cost a dry-run either.
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=1_000_000)
    repo.claim_template("ml", "one-gpu")
    created = fleet.apply()
    ns = repo.ns("ml")
    assert actions(created) == {
        f"Namespace {ns}": "created",
        f"DeviceClass {repo.device_class_name}": "created",
        f"ServiceAccount {ns}/fleet-team": "created",
        f"Role {ns}/fleet-team-claims": "created",
        f"RoleBinding {ns}/fleet-team-claims": "created",
        f"ResourceQuota {ns}/fleet-devices": "created",
        f"ResourceClaimTemplate {ns}/one-gpu": "created",
    }
    assert not created.failed

    result: list[engine.ChangeSet] = []
    clients: list[object] = []

    def noop() -> None:
        result.append(fleet.apply())
        clients.append(fleet.last_client)  # the apply's client, not the one that reads the metrics after it

    server_writes = fleet.server_writes(noop)
    assert {e.action for e in result[0].entries} == {engine.Action.UNCHANGED}
    [client] = clients
    assert isinstance(client, kube.Client)
    assert client.counts.writes == 0
    assert client.counts.by_verb["apply-dry-run"] == 0, "live state settles a no-op without dry-runs"
    assert server_writes == 0


def test_change_configures_only_what_differs(fleet: Engine, repo: Repo) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.claim_template("ml", "gpus", count=1)
    fleet.apply()
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=6)
    repo.claim_template("ml", "gpus", count=2)
    ns = repo.ns("ml")

    preview = fleet.diff()
    changed = {str(e.ref): str(e.action) for e in preview.changed}
    assert changed == {
        f"ResourceQuota {ns}/fleet-devices": "configured",
        f"ResourceClaimTemplate {ns}/gpus": "configured",
    }
    quota_diff = next(e for e in preview.entries if e.ref.kind == "ResourceQuota")
    assert previews.unified(quota_diff).count("\n-") >= 1

    applied = fleet.apply()
    assert {str(e.ref): str(e.action) for e in applied.changed} == changed
    live = fleet.run(lambda c: c.get(kube.Ref("resource.k8s.io/v1", "ResourceClaimTemplate", ns, "gpus")))
    assert live["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    assert not fleet.diff().changed


def test_prune_deletes_only_undeclared_ledger_objects(fleet: Engine, repo: Repo) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "old")
    repo.claim_template("ml", "kept")
    repo.claim_template("ml", "stays")
    fleet.apply()
    ns = repo.ns("ml")
    template = kube.Ref("resource.k8s.io/v1", "ResourceClaimTemplate", ns, "kept")
    unmanaged = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "by-hand", "namespace": ns},
        "spec": {
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": repo.device_class_name}}]}}
        },
    }

    async def prepare(c: kube.Client) -> None:
        await c.apply(
            {
                "apiVersion": template.api_version,
                "kind": template.kind,
                "metadata": {"name": "kept", "namespace": ns, "annotations": {ownership.KEEP: ownership.KEEP_VALUE}},
            },
            field_manager="operator-on-call",
        )
        await c.apply(unmanaged, field_manager="kubectl")

    fleet.run(prepare)
    del repo.claims["ml/old"]
    del repo.claims["ml/kept"]

    preview = fleet.diff()
    assert actions(preview)[f"ResourceClaimTemplate {ns}/old"] == "deleted"
    assert actions(preview)[f"ResourceClaimTemplate {ns}/kept"] == "skipped"

    without_prune = fleet.apply()
    assert actions(without_prune)[f"ResourceClaimTemplate {ns}/old"] == "skipped"
    assert fleet.run(lambda c: c.get(kube.Ref("resource.k8s.io/v1", "ResourceClaimTemplate", ns, "old")))

    pruned = fleet.apply(prune=True)
    assert actions(pruned)[f"ResourceClaimTemplate {ns}/old"] == "deleted"
    assert actions(pruned)[f"ResourceClaimTemplate {ns}/kept"] == "skipped"
    assert f"ResourceClaimTemplate {ns}/by-hand" not in actions(pruned)

    async def names(c: kube.Client) -> set[str]:
        k = await c.kind(api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate")
        return {o["metadata"]["name"] for o in (await c.list(k, namespace=ns)).items}

    assert fleet.run(names) == {"kept", "stays", "by-hand"}


def test_empty_revision_is_refused_unless_allowed(fleet: Engine, repo: Repo) -> None:
    repo.device_class = False
    with pytest.raises(FleetError) as err:
        fleet.apply(prune=True)
    assert "--allow-empty" in str(err.value)
    assert not fleet.apply(prune=True, allow_empty=True).failed
