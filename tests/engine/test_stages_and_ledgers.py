"""The stage table and the ledger's pure parts: shard layout, encoding, three-way merge."""

from __future__ import annotations

import random

import pytest

from fleet.engine import ledgers, stages
from fleet.policy import tenancy


def test_one_entry_per_stage_with_kinds_gate_and_reverse_prune_order() -> None:
    names = [s.name for s in stages.STAGES]
    assert len(names) == len(set(names))
    assert [s.name for s in stages.prune_order()] == list(reversed(names))
    assert stages.stage_of("DeviceClass").gate == stages.Gate.CLASSES_PUBLISHED
    assert stages.by_name("operator").kinds == ()
    with pytest.raises(KeyError):
        stages.stage_of("Deployment")


def _entries(n: int, *, namespaces: int = 50) -> ledgers.Entries:
    out: ledgers.Entries = {}
    for i in range(n):
        out[f"resource.k8s.io/ResourceClaimTemplate/team-{i % namespaces}/template-{i:06d}"] = ledgers.Entry(
            "resource.k8s.io/v1"
        )
    for t in range(namespaces):
        out[f"/Namespace//team-{t}"] = ledgers.Entry("v1")
        out[f"/ResourceQuota/team-{t}/fleet-devices"] = ledgers.Entry("v1")
    return out


def test_ledger_round_trips_through_its_config_maps() -> None:
    entries = _entries(300)
    layout = ledgers.layout(entries, existing=())
    assert set(layout) == {"claims", "namespaces", "tenancy"}, "small stages: one shard each"
    maps = [
        ledgers.body(
            cluster="east", name=ledgers.shard_name("east", s), shard=s, data={"entries": ledgers.encode_entries(e)}
        )
        for s, e in layout.items()
    ]
    progress = ledgers.Progress(revision="r", done=["namespaces"], complete=False)
    maps.append(
        ledgers.body(
            cluster="east", name="fleet-ledger-east", shard=ledgers.INDEX, data={"progress": progress.to_json()}
        )
    )
    back = ledgers.decode("east", maps)
    assert back.entries == entries and back.progress == progress and back.exists
    assert back.layout() == layout, "an unchanged ledger lays out identically (no write)"
    assert {m["metadata"]["labels"]["fleet.gpufleet.dev/cluster"] for m in maps} == {"east"}


def test_100000_entries_split_into_shards_under_256_kib() -> None:
    entries = _entries(100_000, namespaces=500)
    layout = ledgers.layout(entries, existing=())
    sizes = [len(ledgers.encode_entries(e)) for e in layout.values()]
    assert max(sizes) <= ledgers.MAX_SHARD_BYTES
    assert sum(len(e) for e in layout.values()) == len(entries), "every entry in exactly one shard"
    assert 40 <= len(layout) <= 200
    # A namespace's entries stay together while shards are that big.
    homes = {s for s, e in layout.items() for k in e if "/team-7/" in k and k.startswith("resource.k8s.io")}
    assert len(homes) == 1


def test_layout_is_stable_when_one_entry_changes() -> None:
    """Removing 10% of the entries only shrinks shards: none moves entries to another shard."""
    entries = _entries(30_000, namespaces=300)
    before = ledgers.layout(entries, existing=())
    kept = {k: v for i, (k, v) in enumerate(sorted(entries.items())) if i % 10}
    after = ledgers.layout(kept, existing=before.keys())
    assert set(after) <= set(before)
    for shard, group in after.items():
        assert group.keys() <= before[shard].keys()


def test_a_split_leaves_its_parent_empty_so_it_is_deleted() -> None:
    entries = _entries(200)
    parent = ledgers.layout(entries, existing=())["claims"]
    grown = {
        **entries,
        **{f"resource.k8s.io/ResourceClaim/big/c-{i:06d}": ledgers.Entry("resource.k8s.io/v1") for i in range(5000)},
    }
    after = ledgers.layout(grown, existing=["claims", "namespaces", "tenancy"])
    assert "claims" not in after and any(s.startswith("claims-") for s in after)
    assert all(k in {k for g in after.values() for k in g} for k in parent)


def test_merge_replays_our_changes_on_theirs() -> None:
    v1 = ledgers.Entry("v1")
    base = {"a": v1, "b": v1}
    ours = {"a": v1, "c": v1}  # we removed b and added c
    theirs = {"a": v1, "b": v1, "d": v1}  # they added d meanwhile
    assert ledgers.merged(base=base, ours=ours, theirs=theirs) == {"a": v1, "c": v1, "d": v1}


def test_entries_read_their_origin_and_an_old_line_reads_as_adopted() -> None:
    text = "/Namespace//a v1 created\n/Namespace//b v1 adopted\nresource.k8s.io/DeviceClass//gpu resource.k8s.io/v1\n"
    assert ledgers.decode_entries(text) == {
        "/Namespace//a": ledgers.Entry("v1", "created"),
        "/Namespace//b": ledgers.Entry("v1", "adopted"),
        "resource.k8s.io/DeviceClass//gpu": ledgers.Entry("resource.k8s.io/v1", "adopted"),
    }
    assert ledgers.encode_entries(ledgers.decode_entries(text)).splitlines()[2].endswith(" adopted")


def test_an_old_single_config_map_ledger_is_read() -> None:
    old = {
        "metadata": {"name": "fleet-ledger-east", "resourceVersion": "7", "labels": {}},
        "data": {"entries": "/Namespace//a v1\n", "progress": '{"revision": "r", "done": [], "complete": true}'},
    }
    ledger = ledgers.decode("east", [old])
    assert ledger.entries == {"/Namespace//a": ledgers.Entry("v1", "adopted")} and ledger.progress.revision == "r"
    assert ledger.layout() == {"namespaces": ledger.entries}, "moved into a shard at the next write"


def test_the_ledger_lives_in_the_namespace_teams_may_not_use() -> None:
    assert tenancy.reserved(ledgers.NAMESPACE) == "which is fleet's own"


def test_the_shards_a_change_touches_are_what_a_whole_layout_gives() -> None:
    """``save`` writes the shards ``changed_shards`` finds from the changed entries alone; on random
    commits (adds, removals, an origin changed, whole namespaces, shards that must split) the
    shards that result are what laying out every entry again gives, every entry in one shard."""
    rng = random.Random(28)
    entries = _entries(6_000, namespaces=40)
    ledger = ledgers.Ledger(cluster="east", entries=dict(entries))
    incremental = whole = 0
    for step in range(60):
        before = {s: dict(e.entries) for s, e in ledger.shards.items()}
        found = ledgers.changed_shards(ledger)
        expected = ledgers.layout(ledger.entries, existing=ledger.shards.keys())
        if found is None:
            whole += 1
            after = expected
        else:
            incremental += 1
            after = {**before, **found}
            after = {s: e for s, e in after.items() if e}
            assert after == expected, f"step {step}"
        assert sorted(k for e in after.values() for k in e) == sorted(ledger.entries), "each entry once"
        ledger.shards = {s: ledgers.Stored(name=s, resource_version=str(step), entries=e) for s, e in after.items()}
        keys = sorted(ledger.entries)
        kind = rng.choice(["add", "add", "remove", "origin", "namespace", "burst"])
        if kind == "add":
            for i in range(rng.randint(1, 5)):
                ledger.entries[f"resource.k8s.io/ResourceClaimTemplate/team-{rng.randrange(40)}/n{step}-{i}"] = (
                    ledgers.Entry("resource.k8s.io/v1")
                )
        elif kind == "remove":
            for key in rng.sample(keys, rng.randint(1, 20)):
                del ledger.entries[key]
        elif kind == "origin":
            key = rng.choice(keys)
            ledger.entries[key] = ledger.entries[key]._replace(origin="adopted")
        elif kind == "namespace":
            gone = f"/team-{rng.randrange(40)}/"
            ledger.entries = {k: e for k, e in ledger.entries.items() if gone not in k}
        else:  # enough at once that a shard splits
            for i in range(3_000):
                ledger.entries[f"resource.k8s.io/ResourceClaimTemplate/team-1/b{step}-{i}"] = ledgers.Entry(
                    "resource.k8s.io/v1"
                )
    assert incremental > 40 and whole >= 2, (incremental, whole)
    settled = ledgers.layout(ledger.entries, existing=ledger.shards.keys())
    ledger.shards = {s: ledgers.Stored(name=s, resource_version="last", entries=e) for s, e in settled.items()}
    assert ledgers.changed_shards(ledger) == {}, "a no-op changes no shard"
