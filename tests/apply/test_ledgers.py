"""The ledger in the real API server: shards, preconditions, two writers, no forced writes."""

from __future__ import annotations

import uuid

import pytest

from fleet import kube
from fleet.engine import ledgers, ownership
from fleet.kube import Ref

pytestmark = pytest.mark.sandbox


def _key(i: int, ns: str = "team-a") -> str:
    return f"resource.k8s.io/ResourceClaimTemplate/{ns}/t-{i:05d}"


async def _shards(client: kube.Client, cluster: str) -> list[dict[str, object]]:
    kind = await client.kind(api_version="v1", kind="ConfigMap")
    listed = await client.list(kind, namespace=ledgers.NAMESPACE, label_selector=f"{ownership.CLUSTER_LABEL}={cluster}")
    return listed.items


@pytest.mark.anyio
async def test_two_writers_keep_each_others_entries(admin_client: kube.Client) -> None:
    cluster = f"t-{uuid.uuid4().hex[:6]}"
    first = await ledgers.load(client=admin_client, cluster=cluster)
    first.entries = {_key(i): ledgers.Entry("resource.k8s.io/v1") for i in range(10)}
    await ledgers.save(client=admin_client, ledger=first)

    a = await ledgers.load(client=admin_client, cluster=cluster)
    b = await ledgers.load(client=admin_client, cluster=cluster)
    a.entries[_key(100)] = ledgers.Entry("resource.k8s.io/v1")
    del a.entries[_key(0)]
    b.entries[_key(200)] = ledgers.Entry("resource.k8s.io/v1")
    await ledgers.save(client=admin_client, ledger=a, progress=False)
    before = admin_client.counts.by_verb["get"]
    await ledgers.save(client=admin_client, ledger=b, progress=False)  # b's read is stale now: 409, re-read, merge
    assert admin_client.counts.by_verb["get"] == before + 1, "the conflict was seen and the shard re-read"

    after = await ledgers.load(client=admin_client, cluster=cluster)
    assert _key(100) in after.entries and _key(200) in after.entries, "neither writer lost its entry"
    assert _key(0) not in after.entries, "a's removal survives b's merge"
    assert b.entries.keys() == after.entries.keys(), "b learned a's entries"
    for cm in await _shards(admin_client, cluster):
        managers = {m["manager"] for m in cm["metadata"].get("managedFields") or ()}  # type: ignore[index]
        assert managers == {ownership.LEDGER_MANAGER}


@pytest.mark.anyio
async def test_only_changed_shards_are_written_and_emptied_ones_deleted(admin_client: kube.Client) -> None:
    cluster = f"t-{uuid.uuid4().hex[:6]}"
    ledger = await ledgers.load(client=admin_client, cluster=cluster)
    ledger.entries = {_key(i, ns=f"ns-{i % 40}"): ledgers.Entry("resource.k8s.io/v1") for i in range(8000)}
    ledger.entries["/Namespace//ns-1"] = ledgers.Entry("v1")
    await ledgers.save(client=admin_client, ledger=ledger)
    shards = [cm for cm in await _shards(admin_client, cluster) if cm["metadata"]["name"] != ledger.ref.name]  # type: ignore[index]
    assert len(shards) >= 3, "8,000 entries need more than one claims shard"
    assert max(len(cm["data"]["entries"]) for cm in shards) <= ledgers.MAX_SHARD_BYTES  # type: ignore[index]

    writes = admin_client.counts.writes
    assert await ledgers.save(client=admin_client, ledger=ledger) == 0
    ledger.entries[_key(1, ns="ns-1")] = ledgers.Entry("resource.k8s.io/v1beta2")
    assert await ledgers.save(client=admin_client, ledger=ledger, progress=False) == 1, "one shard changed"
    del ledger.entries["/Namespace//ns-1"]
    assert await ledgers.save(client=admin_client, ledger=ledger, progress=False) == 1
    assert admin_client.counts.writes == writes + 2
    assert admin_client.counts.by_verb["delete"] == 1, "the emptied namespaces shard is deleted"
    assert (await ledgers.load(client=admin_client, cluster=cluster)).entries == ledger.entries


@pytest.mark.anyio
async def test_an_old_single_config_map_ledger_moves_into_shards(admin_client: kube.Client) -> None:
    cluster = f"t-{uuid.uuid4().hex[:6]}"
    old = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": ledgers.index_name(cluster),
            "namespace": ledgers.NAMESPACE,
            "labels": {ownership.MANAGED_BY: ownership.MANAGER, ownership.CLUSTER_LABEL: cluster},
        },
        "data": {"entries": "/Namespace//a v1\n", "progress": '{"complete": true, "done": [], "revision": "r"}'},
    }
    await admin_client.apply(old, field_manager=ownership.LEDGER_MANAGER, force=True)
    ledger = await ledgers.load(client=admin_client, cluster=cluster)
    assert ledger.entries == {"/Namespace//a": ledgers.Entry("v1", "adopted")}, "no origin: adopted"
    await ledgers.save(client=admin_client, ledger=ledger, progress=False)
    index = await admin_client.get(Ref("v1", "ConfigMap", ledgers.NAMESPACE, ledgers.index_name(cluster)))
    assert "entries" not in index["data"]
    assert (await ledgers.load(client=admin_client, cluster=cluster)).entries == ledger.entries
