"""Writing a pool's metadata to a Node: from a fresh read, with that read's resourceVersion.

Node taints are one atomic list in the API, and several parties write it: the node
lifecycle controller (``node.kubernetes.io/unreachable:NoExecute``), the kubelet,
operators, people with ``kubectl taint``. fleet owns only its pools' taints (their
keys are recorded in the ``pool-taints`` annotation) but has to send the whole list.
A list computed from the Nodes listed when the run started, possibly minutes before,
would wipe a taint that appeared since (a ``NoExecute`` one evicts pods when it comes
back after a removal) or restore one somebody removed. So every write of pool metadata:

1. reads the Node: the copy the run listed, when it has one, else a GET;
2. computes the body from that read (``plans.pool_objects`` or ``plans.release``):
   the taints others own as they are then, plus the pool's;
3. applies it as ``fleet-pools`` carrying the read's ``metadata.resourceVersion``: the
   API server refuses it (409) when the Node changed since that read, however old;
4. on that refusal, GETs it again, at most ``ATTEMPTS`` reads in all.

The precondition, not the age of the read, is what makes the write safe, so a listed
copy serves as the first read: a Node nobody changed since the listing costs one
request instead of two. Only a fresh read may say there is nothing to write.

The apply forces field ownership (the node lifecycle controller co-owns the list);
the precondition, not the force, is what keeps the write from undoing anyone else's.
A Node whose fresh state already is what fleet would apply is not written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fleet.engine import normalizations, ownership
from fleet.kube import Client, Conflict, Ref

ATTEMPTS = 5
"""Reads and writes before giving up on a Node that changes under every write."""

Body = Callable[[dict[str, Any]], dict[str, Any] | None]
"""The body to apply, computed from the Node as just read (None: nothing to write)."""


async def write(*, client: Client, ref: Ref, body: Body, listed: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Apply ``body(node)`` as ``fleet-pools``, conditional on the Node not changing since it was read.

    ``listed``: the Node as the run listed it, the first read (the write's precondition is its
    resourceVersion). Returns the Node as written, or as freshly read when it already was as
    wanted; None when ``body`` wants nothing of the Node as it is now (no pool selects it any
    more). Raises ``kube.Conflict`` when the Node changed during every attempt: nothing was
    written.
    """
    live = listed
    for _ in range(ATTEMPTS):
        fresh = live is None
        if live is None:
            live = await client.get(ref)
        wanted = body(live)
        if wanted is None or normalizations.unchanged_without_dry_run(wanted, live, manager=ownership.POOL_MANAGER):
            if not fresh:
                live = None  # the listing may be stale: only a fresh read says there is nothing to write
                continue
            return None if wanted is None else live
        meta = {**wanted["metadata"], "resourceVersion": live["metadata"]["resourceVersion"]}
        try:
            return await client.apply({**wanted, "metadata": meta}, field_manager=ownership.POOL_MANAGER, force=True)
        except Conflict:
            live = None  # the Node changed since the read (a force apply has no field conflicts): read again
    raise Conflict(
        f"the Node changed between fleet's read and its write {ATTEMPTS} times in a row; its pool labels "
        "and taints were not written",
        where=str(ref),
        hint="something rewrites this Node continuously; run the apply again, and look for that writer in "
        "`kubectl get node --show-managed-fields -o yaml`",
    )


__all__ = ["ATTEMPTS", "Body", "write"]
