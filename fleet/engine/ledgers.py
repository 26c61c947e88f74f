"""The ledger: what fleet applied to a cluster, recorded in that cluster, in shards.

Pruning must know what fleet created earlier, also when the controller restarted
or another machine runs ``fleetctl apply``. So the record lives in the cluster, in
ConfigMaps of ``fleet-system`` labelled with the cluster:

- the index ``fleet-ledger-<cluster>`` holds ``progress``: JSON ``{"revision",
  "done": [stages], "complete"}``. A run killed half-way leaves ``complete: false``
  and the next run for the same revision skips the stages already done;
- shards ``fleet-ledger-<cluster>-<stage>-<bits>`` hold ``entries``, one line per
  object: ``<group>/<Kind>/<namespace>/<name> <apiVersion> <origin>``, origin being
  ``created`` or ``adopted`` (see ``Entry``: pruning deletes only what fleet created).

Why shards: one ConfigMap is capped at 1 MiB by etcd, about 10,000 entries. An
entry goes to a shard by its stage and by a hash whose leading bits come from its
namespace (``bits_of``): a namespace's entries stay together until a shard must
split. A shard is the longest bit prefix, among the shards that exist, of its
entries' hashes; one whose body would pass ``SPLIT_BYTES`` splits in two (one more
bit), so no shard ever grows past ``MAX_SHARD_BYTES`` (256 KiB) and a 100,000-object
ledger is a few dozen shards. A shard left empty is deleted.

Why preconditions: two writers (a controller and someone's ``fleetctl apply``)
must never lose each other's entries. Shards are created with ``create`` (which
fails if the shard exists) and changed with ``update`` carrying the
``resourceVersion`` that was read; deletes carry it too. Nothing is forced. On a
409 the shard is read again and this run's own changes (entries it added, entries
it removed, relative to what it had read) are replayed on top of what is there now,
then written with the new version (``merged``). Only shards whose content changed
are written, so a no-op reconcile writes nothing; before a stage creates objects
their entries are added (a crash after the create cannot leak an untracked object);
after pruning, the entries shrink to what is desired.

A ledger written by an older fleet (every entry in the index ConfigMap) is read as
it is and moved into shards at its next write.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

import anyio

from fleet.engine import ownership, stages
from fleet.errors import FleetError
from fleet.kube import Client, Conflict, NotFound, Ref

NAMESPACE = "fleet-system"
CREATED = "created"
ADOPTED = "adopted"
Origin = Literal["created", "adopted"]
MAX_SHARD_BYTES = 256 * 1024
"""No shard body (its ``entries`` text) is ever larger than this."""
SPLIT_BYTES = 192 * 1024
"""A shard whose entries would pass this splits in two: a merge after a conflict may still add some."""
MAX_BITS = 40
"""Deepest split (2^40 shards per stage: never reached, but bounds the label value)."""
SHARD_LABEL = f"{ownership.DOMAIN}/ledger-shard"
"""The shard id (``<stage>-<bits>``) on each shard; the index has ``index``."""
INDEX = "index"
WRITE_CONCURRENCY = 8


class Entry(NamedTuple):
    """One object fleet manages: the apiVersion it was applied with, and whether fleet created it.

    A line is ``<key> <apiVersion> <origin>``; ``origin`` is ``created`` (fleet created it:
    pruning may delete it) or ``adopted`` (it existed before and the repository said to
    adopt it: pruning only releases it). A line without an origin (written before origins
    were recorded) reads as ``adopted``: fleet cannot tell any more, and releasing is the
    choice that loses nothing.
    """

    api_version: str
    origin: Origin = "created"

    @property
    def adopted(self) -> bool:
        return self.origin == ADOPTED

    def words(self) -> list[str]:
        return [self.api_version, self.origin]

    @classmethod
    def from_words(cls, words: list[str]) -> Entry:
        return cls(words[0] if words else "", "created" if words[1:2] == [CREATED] else "adopted")


Entries = dict[str, Entry]
"""``Ref.key`` → Entry."""


@dataclass
class Progress:
    revision: str = ""
    done: list[str] = field(default_factory=list)
    complete: bool = True
    waiting: dict[str, str] = field(default_factory=dict)
    """``Ref.key`` → when (ISO 8601) a disruptive change began waiting for the jobs on its nodes:
    the deadline counts from there, across runs and restarts (``fleet.engine.waits``)."""

    drained: dict[str, str] = field(default_factory=dict)
    """Node → the ``Ref.key`` of the change fleet cordoned it for (``fleet.engine.drains``): uncordoned
    once that change no longer waits."""

    def to_json(self) -> str:
        out: dict[str, object] = {"revision": self.revision, "done": self.done, "complete": self.complete}
        if self.waiting:
            out["waiting"] = dict(sorted(self.waiting.items()))
        if self.drained:
            out["drained"] = dict(sorted(self.drained.items()))
        return json.dumps(out, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Progress:
        raw = json.loads(text or "{}")
        return cls(
            revision=str(raw.get("revision", "")),
            done=list(raw.get("done", [])),
            complete=bool(raw.get("complete", True)),
            waiting={str(k): str(v) for k, v in (raw.get("waiting") or {}).items()},
            drained={str(k): str(v) for k, v in (raw.get("drained") or {}).items()},
        )


@dataclass
class Stored:
    """One ConfigMap of the ledger as last read or written: the base for the next write."""

    name: str
    resource_version: str
    entries: Entries
    data: dict[str, str] = field(default_factory=dict)


@dataclass
class Ledger:
    cluster: str
    entries: Entries = field(default_factory=dict)
    progress: Progress = field(default_factory=Progress)
    shards: dict[str, Stored] = field(default_factory=dict)
    """Shard id → what the cluster holds (as far as this process knows)."""
    index: Stored | None = None
    """The index ConfigMap, None until it exists."""

    @property
    def exists(self) -> bool:
        return self.index is not None or bool(self.shards)

    @property
    def ref(self) -> Ref:
        return Ref(api_version="v1", kind="ConfigMap", namespace=NAMESPACE, name=index_name(self.cluster))

    def layout(self) -> dict[str, Entries]:
        """Shard id → the entries it should hold now (see the module docstring)."""
        return layout(self.entries, existing=self.shards.keys())


def index_name(cluster: str) -> str:
    return f"fleet-ledger-{cluster}"


def shard_name(cluster: str, shard: str) -> str:
    return f"fleet-ledger-{cluster}-{shard}"


# -- pure: where entries go, how shards read and write ----------------------------------------


@functools.lru_cache(maxsize=1 << 18)
def bits_of(key: str) -> str:
    """The hash bits that place ``key``: 20 bits of its namespace's hash, then 20 of its own.

    Memoised for the process (a pure function of the key): a ledger is read afresh by every
    run, and the controller lays out the same 10,000 keys on every commit."""
    _group, _kind, namespace, _name = key.split("/", 3)
    ns = int.from_bytes(hashlib.sha1(namespace.encode()).digest()[:3]) >> 4
    own = int.from_bytes(hashlib.sha1(key.encode()).digest()[:3]) >> 4
    return f"{ns:020b}{own:020b}"


def shard_id(stage: str, prefix: str) -> str:
    """``<stage>`` for a stage's first shard, ``<stage>-<bits>`` once it split."""
    return f"{stage}-{prefix}" if prefix else stage


def stage_of_key(key: str) -> str:
    kind = key.split("/", 3)[1]
    try:
        return stages.stage_of(kind).name
    except KeyError:
        return "other"


def placer(existing: Iterable[str]) -> Callable[[str], str]:
    """The shard id a key goes to among ``existing`` shards: the existing shard of its stage with
    the longest prefix of its bits, ``<stage>`` when none matches."""
    prefixes: dict[str, set[str]] = {}
    for shard in existing:
        stage, _, prefix = shard.partition("-")
        prefixes.setdefault(stage, set()).add(prefix)
    # the prefix lengths each stage's shards have, longest first: what an entry's bits are tried at
    lengths = {stage: sorted({len(p) for p in known if p}, reverse=True) for stage, known in prefixes.items()}

    def place(key: str) -> str:
        stage = stage_of_key(key)
        b = bits_of(key)
        known = prefixes.get(stage, set())
        for n in lengths.get(stage, ()):
            if n <= MAX_BITS and b[:n] in known:
                return shard_id(stage, b[:n])
        return shard_id(stage, "")

    return place


def layout(entries: Mapping[str, Entry], *, existing: Iterable[str]) -> dict[str, Entries]:
    """Shard id → entries: each entry where ``placer`` puts it, splitting shards that would pass
    ``SPLIT_BYTES``."""
    place = placer(existing)
    groups: dict[str, Entries] = {}
    for key, entry in entries.items():
        groups.setdefault(place(key), {})[key] = entry
    out: dict[str, Entries] = {}
    todo = list(groups.items())
    while todo:
        shard, group = todo.pop()
        stage, _, prefix = shard.partition("-")
        if len(prefix) >= MAX_BITS or encoded_size(group) <= SPLIT_BYTES:
            out[shard] = group
            continue
        halves: dict[str, Entries] = {shard_id(stage, prefix + "0"): {}, shard_id(stage, prefix + "1"): {}}
        for key, entry in group.items():
            halves[shard_id(stage, prefix + bits_of(key)[len(prefix)])][key] = entry
        todo.extend(halves.items())
    return {shard: group for shard, group in out.items() if group}


def encode_entries(entries: Mapping[str, Entry]) -> str:
    return "".join(f"{key} {' '.join(entry.words())}\n" for key, entry in sorted(entries.items()))


def encoded_size(entries: Mapping[str, Entry]) -> int:
    return sum(len(key) + 1 + sum(len(w) + 1 for w in entry.words()) for key, entry in entries.items())


def decode_entries(text: str) -> Entries:
    """Entries of a shard's text; lines that say the same (apiVersion, origin) share one ``Entry``
    (a 10,000-entry ledger has a handful: decoded on every run, that is most of reading it)."""
    entries: Entries = {}
    shared: dict[tuple[str, ...], Entry] = {}
    for line in text.splitlines():
        key, *rest = line.split() or ("",)
        if not key:
            continue
        words = tuple(rest)
        entry = shared.get(words)
        if entry is None:
            entry = shared[words] = Entry.from_words(rest)
        entries[key] = entry
    return entries


def merged(*, base: Mapping[str, Entry], ours: Mapping[str, Entry], theirs: Mapping[str, Entry]) -> Entries:
    """Our changes since ``base`` replayed on ``theirs`` (the shard as another writer left it)."""
    out = dict(theirs)
    for key in base.keys() - ours.keys():
        out.pop(key, None)
    for key, entry in ours.items():
        if base.get(key) != entry:
            out[key] = entry
    return out


def body(*, cluster: str, name: str, shard: str, data: dict[str, str], resource_version: str = "") -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": NAMESPACE,
        "labels": {ownership.MANAGED_BY: ownership.MANAGER, ownership.CLUSTER_LABEL: cluster, SHARD_LABEL: shard},
    }
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def decode(cluster: str, config_maps: Iterable[dict[str, Any]]) -> Ledger:
    """The Ledger held by ``config_maps`` (the index and the shards of ``cluster``)."""
    ledger = Ledger(cluster=cluster)
    for cm in config_maps:
        meta = cm.get("metadata") or {}
        data = dict(cm.get("data") or {})
        shard = (meta.get("labels") or {}).get(SHARD_LABEL, "")
        stored = Stored(
            name=str(meta.get("name", "")),
            resource_version=str(meta.get("resourceVersion", "")),
            entries=decode_entries(data.get("entries", "")),
            data=data,
        )
        if meta.get("name") == index_name(cluster):
            ledger.index = stored
            ledger.progress = Progress.from_json(data.get("progress", ""))
        elif shard:
            ledger.shards[shard] = stored
        else:
            continue
        for key, entry in stored.entries.items():
            ledger.entries.setdefault(key, entry)
    return ledger


# -- I/O --------------------------------------------------------------------------------------


async def load(*, client: Client, cluster: str) -> Ledger:
    """Read the index and every shard: one (paginated) list."""
    kind = await client.kind(api_version="v1", kind="ConfigMap")
    try:
        listed = await client.list(
            kind, namespace=NAMESPACE, label_selector=f"{ownership.CLUSTER_LABEL}={cluster}", page_size=50
        )
    except NotFound:
        return Ledger(cluster=cluster)
    return decode(cluster, (cm for cm in listed.items if _ours(cm, cluster)))


def _ours(cm: dict[str, Any], cluster: str) -> bool:
    meta = cm.get("metadata") or {}
    return meta.get("name") == index_name(cluster) or SHARD_LABEL in (meta.get("labels") or {})


async def save(*, client: Client, ledger: Ledger, progress: bool = True) -> int:
    """Write what changed: shards first (new and grown before emptied ones are deleted), then
    the index if ``progress`` and it differs. Returns the number of writes."""
    writes = 0
    legacy = ledger.index is not None and "entries" in ledger.index.data
    wanted = None if legacy else changed_shards(ledger)
    if wanted is not None:
        changed = sorted(wanted)
    else:
        wanted = ledger.layout()
        changed = [s for s in sorted(wanted.keys() | ledger.shards.keys()) if _differs(ledger, s, wanted.get(s, {}))]
    if changed and not ledger.exists:
        await ensure_namespace(client)
    limiter = anyio.CapacityLimiter(WRITE_CONCURRENCY)
    failures: list[FleetError] = []

    async def write(shard: str) -> None:
        async with limiter:
            try:
                await _write_shard(client=client, ledger=ledger, shard=shard, ours=wanted.get(shard, {}))
            except FleetError as err:
                failures.append(err)  # one plain error for the user, not an exception group

    for growing in (True, False):
        async with anyio.create_task_group() as tg:
            for shard in changed:
                if bool(wanted.get(shard)) == growing:
                    tg.start_soon(write, shard)
        if failures:
            raise failures[0]
    writes += len(changed)
    if progress or legacy:
        data = {"progress": ledger.progress.to_json()}
        if ledger.index is None or ledger.index.data != data:
            await _write_index(client=client, ledger=ledger, data=data)
            writes += 1
    return writes


def changed_shards(ledger: Ledger) -> dict[str, Entries] | None:
    """The shards whose entries change (``{}``: the shard goes) and their new entries, placed as
    ``layout`` places them, found from the entries that changed alone: a commit that adds one
    claim to 10,000 rewrites one shard without laying out the rest. None where only a whole
    ``layout`` can say: a shard would pass ``SPLIT_BYTES`` and split."""
    stored: Entries = {}
    home: dict[str, str] = {}
    for shard, held in ledger.shards.items():
        for key, entry in held.entries.items():
            stored[key] = entry
            home[key] = shard
    entries = ledger.entries
    if stored == entries:
        return {}
    place = placer(ledger.shards.keys())
    out: dict[str, Entries] = {}

    def group(shard: str) -> Entries:
        if shard not in out:
            held = ledger.shards.get(shard)
            out[shard] = dict(held.entries) if held is not None else {}
        return out[shard]

    for key in stored.keys() - entries.keys():
        del group(home[key])[key]
    for key, entry in entries.items():
        if key in home:
            if stored[key] == entry:
                continue
            del group(home[key])[key]
        group(place(key))[key] = entry
    if any(encoded_size(held) > SPLIT_BYTES for held in out.values()):
        return None
    return {shard: group for shard, group in out.items() if _differs(ledger, shard, group)}


def _differs(ledger: Ledger, shard: str, ours: Entries) -> bool:
    stored = ledger.shards.get(shard)
    return (stored.entries if stored else {}) != ours


async def ensure_namespace(client: Client) -> None:
    """fleet's own namespace (the ledger's shards and the writer Lease live there)."""
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {ownership.MANAGED_BY: ownership.MANAGER}},
    }
    await client.apply(namespace, field_manager=ownership.LEDGER_MANAGER)


async def _write_shard(*, client: Client, ledger: Ledger, shard: str, ours: Entries) -> None:
    """Create, update or delete one shard with preconditions; on 409 re-read, merge, retry."""
    name = shard_name(ledger.cluster, shard)
    ref = Ref(api_version="v1", kind="ConfigMap", namespace=NAMESPACE, name=name)
    stored = ledger.shards.get(shard)
    base: Entries = stored.entries if stored else {}
    want = ours
    for _attempt in range(10):
        try:
            if stored is None and not want:
                return
            if stored is not None and not want:
                await client.delete(ref, resource_version=stored.resource_version)
                ledger.shards.pop(shard, None)
                return
            data = {"entries": encode_entries(want)}
            cm = body(
                cluster=ledger.cluster,
                name=name,
                shard=shard,
                data=data,
                resource_version=stored.resource_version if stored else "",
            )
            if len(data["entries"]) > MAX_SHARD_BYTES:
                raise FleetError(
                    f"ledger shard {shard} would hold {len(data['entries'])} bytes, over {MAX_SHARD_BYTES}",
                    where=f"ConfigMap {NAMESPACE}/{name}, cluster {ledger.cluster}",
                    hint="run again: the next write splits the shard",
                )
            if stored is None:
                result = await client.create(cm, field_manager=ownership.LEDGER_MANAGER)
            else:
                result = await client.update(cm, field_manager=ownership.LEDGER_MANAGER)
            ledger.shards[shard] = Stored(
                name=name, resource_version=str(result["metadata"]["resourceVersion"]), entries=dict(want), data=data
            )
            return
        except (Conflict, NotFound):
            try:
                current = await client.get(ref)
            except NotFound:
                current = None
            if (
                current is not None
                and ((current.get("metadata") or {}).get("labels") or {}).get(ownership.CLUSTER_LABEL) != ledger.cluster
            ):
                raise FleetError(
                    f"ConfigMap {NAMESPACE}/{name} exists but is not cluster {ledger.cluster}'s ledger",
                    where=f"cluster {ledger.cluster}",
                    hint="another cluster's name makes the same ledger name; rename one of the clusters",
                ) from None
            theirs = decode_entries(((current or {}).get("data") or {}).get("entries", ""))
            want = merged(base=base, ours=ours, theirs=theirs)
            for key in want.keys() - ledger.entries.keys():
                ledger.entries[key] = want[key]  # another writer's entry: ours to prune later too
            for key in ours.keys() - want.keys():
                ledger.entries.pop(key, None)  # another writer removed it (pruned) and we had not touched it
            base = theirs
            ours = want
            stored = (
                None
                if current is None
                else Stored(name=name, resource_version=str(current["metadata"]["resourceVersion"]), entries=theirs)
            )
    raise FleetError(
        f"ledger shard {shard} kept changing under this run (10 conflicts in a row)",
        where=f"ConfigMap {NAMESPACE}/{name}, cluster {ledger.cluster}",
        hint="is another fleet writing the same cluster? Run one controller per cluster (the Lease), then retry",
    )


async def _write_index(*, client: Client, ledger: Ledger, data: dict[str, str]) -> None:
    """The index holds this run's progress: on 409 it is re-read and written again over the new version."""
    name = index_name(ledger.cluster)
    for _attempt in range(10):
        stored = ledger.index
        cm = body(
            cluster=ledger.cluster,
            name=name,
            shard=INDEX,
            data=data,
            resource_version=stored.resource_version if stored else "",
        )
        try:
            if stored is None:
                if not ledger.shards:
                    await ensure_namespace(client)
                result = await client.create(cm, field_manager=ownership.LEDGER_MANAGER)
            else:
                result = await client.update(cm, field_manager=ownership.LEDGER_MANAGER)
            ledger.index = Stored(
                name=name, resource_version=str(result["metadata"]["resourceVersion"]), entries={}, data=dict(data)
            )
            return
        except (Conflict, NotFound):
            try:
                current = await client.get(ledger.ref)
            except NotFound:
                ledger.index = None
                continue
            ledger.index = replace(
                stored or Stored(name=name, resource_version="", entries={}),
                resource_version=str(current["metadata"]["resourceVersion"]),
                data=dict(current.get("data") or {}),
            )
    raise FleetError(
        f"ledger index {name} kept changing under this run (10 conflicts in a row)",
        where=f"cluster {ledger.cluster}",
        hint="is another fleet writing the same cluster? Run one controller per cluster (the Lease), then retry",
    )


__all__ = [
    "ADOPTED",
    "CREATED",
    "INDEX",
    "MAX_SHARD_BYTES",
    "NAMESPACE",
    "SHARD_LABEL",
    "SPLIT_BYTES",
    "Entries",
    "Entry",
    "Ledger",
    "Origin",
    "Progress",
    "Stored",
    "bits_of",
    "changed_shards",
    "decode",
    "decode_entries",
    "encode_entries",
    "ensure_namespace",
    "index_name",
    "layout",
    "load",
    "merged",
    "placer",
    "save",
    "shard_name",
]
