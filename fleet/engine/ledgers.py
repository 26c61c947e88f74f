"""The ledger: what fleet applied to a cluster, recorded in that cluster.

Pruning must know what fleet created earlier, also when the controller restarted
or another machine runs ``fleetctl apply``. So the record lives in the cluster, in
one ConfigMap per cluster (``fleet-system/fleet-ledger-<cluster>``), written by
server-side apply as ``fleet-ledger``:

- ``entries``: one line per object, ``<group>/<Kind>/<namespace>/<name> <apiVersion> <origin>``,
  where origin is ``created`` (fleet created it: pruning may delete it) or ``adopted``
  (it existed before and the repository said to adopt it: pruning only releases it).
  A line without an origin (written before origins were recorded) reads as
  ``adopted``: fleet cannot tell any more, and releasing is the choice that loses nothing;
- ``progress``: JSON ``{"revision", "done": [stages], "complete"}``; a run killed
  half-way leaves ``complete: false`` and the next run for the same revision skips
  the stages already done, so nothing finished is written twice.

The record is only written when its content changes, so a no-op reconcile makes no
write at all. Before a stage creates objects their entries are added (a crash after
the create cannot leak an untracked object); after pruning, the entries shrink to
what is desired.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from fleet.engine import ownership
from fleet.kube import Client, NotFound, Ref

NAMESPACE = "fleet-system"
CREATED = "created"
ADOPTED = "adopted"
Origin = Literal["created", "adopted"]


class Entry(NamedTuple):
    """One object fleet manages: the apiVersion it was applied with, and whether fleet created it."""

    api_version: str
    origin: Origin = "created"

    @property
    def adopted(self) -> bool:
        return self.origin == ADOPTED


@dataclass
class Progress:
    revision: str = ""
    done: list[str] = field(default_factory=list)
    complete: bool = True

    def to_json(self) -> str:
        return json.dumps({"revision": self.revision, "done": self.done, "complete": self.complete}, sort_keys=True)


@dataclass
class Ledger:
    cluster: str
    entries: dict[str, Entry] = field(default_factory=dict)
    """Ref.key → Entry (apiVersion, created|adopted)."""
    progress: Progress = field(default_factory=Progress)
    exists: bool = False

    @property
    def ref(self) -> Ref:
        return Ref(api_version="v1", kind="ConfigMap", namespace=NAMESPACE, name=config_map_name(self.cluster))

    def encode(self) -> dict[str, Any]:
        """The ConfigMap to apply."""
        lines = "".join(f"{key} {e.api_version} {e.origin}\n" for key, e in sorted(self.entries.items()))
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.ref.name,
                "namespace": NAMESPACE,
                "labels": {ownership.MANAGED_BY: ownership.MANAGER, ownership.CLUSTER_LABEL: self.cluster},
            },
            "data": {"entries": lines, "progress": self.progress.to_json()},
        }


def config_map_name(cluster: str) -> str:
    return f"fleet-ledger-{cluster}"


def decode(cluster: str, config_map: dict[str, Any] | None) -> Ledger:
    if config_map is None:
        return Ledger(cluster=cluster)
    data = config_map.get("data") or {}
    entries: dict[str, Entry] = {}
    for line in (data.get("entries") or "").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            entries[parts[0]] = Entry(parts[1], "created" if parts[2:] == [CREATED] else "adopted")
    raw = json.loads(data.get("progress") or "{}")
    progress = Progress(
        revision=str(raw.get("revision", "")), done=list(raw.get("done", [])), complete=bool(raw.get("complete", True))
    )
    return Ledger(cluster=cluster, entries=entries, progress=progress, exists=True)


async def load(*, client: Client, cluster: str) -> Ledger:
    inv = Ledger(cluster=cluster)
    try:
        return decode(cluster, await client.get(inv.ref))
    except NotFound:
        return inv


async def save(*, client: Client, ledger: Ledger, saved: dict[str, Any] | None) -> dict[str, Any]:
    """Write ``ledger`` if it differs from ``saved`` (the last written body); returns the body."""
    body = ledger.encode()
    if saved is not None and saved == body:
        return body
    if not ledger.exists:
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {ownership.MANAGED_BY: ownership.MANAGER}},
        }
        await client.apply(namespace, field_manager=ownership.LEDGER_MANAGER)
    await client.apply(body, field_manager=ownership.LEDGER_MANAGER, force=True)
    ledger.exists = True
    return body


__all__ = [
    "ADOPTED",
    "CREATED",
    "NAMESPACE",
    "Entry",
    "Ledger",
    "Origin",
    "Progress",
    "config_map_name",
    "decode",
    "load",
    "save",
]
