"""One writer per cluster: whoever writes holds the cluster's Lease for as long as it writes.

Two writers at once would each diff against a cluster the other is changing, and
apply, prune and record the ledger from stale reads. So ``fleetctl apply`` and the
controller write only while holding ``Lease fleet-system/fleet-<cluster>``
(``fleet.kube.leases``: holder ``user@host:pid`` for the CLI, the pod name for the
controller, renewed in the background, released on the way out):

- ``fleetctl apply`` takes it before anything else, so a second concurrent apply is
  refused before it has read or written anything, with the holder and since when
  (``Held``); ``--wait`` queues behind the holder instead.
- The controller holds it as its leader election and runs every reconcile under it;
  ``fleetctl apply`` against a cluster whose controller leads is refused the same way.
- If the Lease is lost while writing (no renewal within the renew deadline, or
  another holder), the writes are cancelled at once and the run ends with
  ``leases.Lost``; the ledger's progress tells the next holder where to resume.

``Sync`` itself takes no Lease: its caller holds it, once, for as long as it needs
(a whole run for the CLI, the whole leadership for the controller). ``diff`` and
``apply --dry-run`` write nothing and take none.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fleet.engine import ledgers
from fleet.kube import Client, NotFound, Ref, leases

NAMESPACE = ledgers.NAMESPACE


def lease_ref(cluster: str) -> Ref:
    """The Lease every writer of ``cluster`` holds."""
    return Ref(api_version=leases.API_VERSION, kind="Lease", namespace=NAMESPACE, name=f"fleet-{cluster}")


def identity() -> str:
    """This process as a Lease holder: ``user@host:pid``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (containers)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}:{os.getpid()}"


@asynccontextmanager
async def lock(
    *,
    client: Client,
    cluster: str,
    holder: str | None = None,
    wait: bool = False,
    timings: leases.Timings | None = None,
    on_wait: Callable[[leases.Record], None] | None = None,
) -> AsyncIterator[leases.Holding]:
    """Hold ``cluster``'s Lease while the body writes (see the module docstring).

    Raises ``leases.Held`` naming the holder when another writer has it (unless
    ``wait``), and ``leases.Lost`` in place of the body's work when it is lost.
    """
    ref = lease_ref(cluster)
    me = holder or identity()
    acquired = False
    for attempt in (1, 2):
        try:
            async with leases.hold(
                client=client, ref=ref, identity=me, timings=timings, wait=wait, on_wait=on_wait
            ) as holding:
                acquired = True
                yield holding
            return
        except NotFound:
            if acquired or attempt == 2:
                raise
            await ledgers.ensure_namespace(client)  # a cluster fleet never wrote to
        except leases.Held as held:
            if acquired:
                raise
            raise leases.Held(
                f"another writer is applying to this cluster: Lease {ref.namespace}/{ref.name} is held by "
                f"{held.record.describe()}; nothing was written",
                record=held.record,
                where=f"cluster {cluster}",
                hint="wait until it finishes, or queue behind it with `fleetctl apply --wait`",
            ) from None


__all__ = ["NAMESPACE", "identity", "lease_ref", "lock"]
