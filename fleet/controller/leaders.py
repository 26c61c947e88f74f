"""Who may write: only the replica holding the cluster's Lease reconciles.

``Leader`` is the flag the rest of the controller reads and the switch that stops
writing at once: every reconcile runs inside ``writing()``, a cancel scope that
``lost()`` cancels, so a replica that loses its Lease stops between two requests,
not after its reconcile.

``elect`` is the one function that decides leadership: it holds the cluster's
writer Lease (``fleet.engine.writers.lock``, the same Lease ``fleetctl apply`` takes,
so an apply against a cluster whose controller leads is refused naming the holder)
with controller-runtime's timings (15 s duration, 10 s renew deadline, 2 s retry),
waiting as a follower while another replica holds it. With ``--no-leader-elect`` the
replica leads alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from fleet.engine import writers
from fleet.kube import Client, KubeError, leases

logger = logging.getLogger(__name__)


class Leader:
    """Whether this replica leads; ``writing()`` scopes are cancelled when it stops leading."""

    def __init__(self) -> None:
        self._leading = False
        self._gained = anyio.Event()
        self._scopes: set[anyio.CancelScope] = set()
        self.holder = ""

    @property
    def leading(self) -> bool:
        return self._leading

    async def wait(self) -> None:
        """Return once this replica leads."""
        while not self._leading:
            await self._gained.wait()

    def gained(self, *, identity: str) -> None:
        self.holder = identity
        self._leading = True
        self._gained.set()

    def lost(self, *, holder: str = "") -> None:
        """Stop leading: every write in flight is cancelled now."""
        self.holder = holder
        self._leading = False
        self._gained = anyio.Event()
        for scope in list(self._scopes):
            scope.cancel()

    @contextmanager
    def writing(self) -> Iterator[anyio.CancelScope]:
        """A scope for writes, cancelled the moment leadership is lost."""
        with anyio.CancelScope() as scope:
            if not self._leading:
                scope.cancel()
            self._scopes.add(scope)
            try:
                yield scope
            finally:
                self._scopes.discard(scope)


async def elect(
    *,
    client: Client,
    cluster: str,
    identity: str,
    enabled: bool,
    leader: Leader,
    timings: leases.Timings | None = None,
) -> None:
    """Campaign for the cluster's Lease and lead while holding it, again and again, until cancelled.

    With ``enabled=False`` this replica leads alone (one replica, or a test). Cancelled
    (SIGTERM), the Lease is released on the way out, so a follower takes over at its
    next try (one retry period) instead of after a whole duration.
    """
    if not enabled:
        leader.gained(identity=identity)
        try:
            await anyio.sleep_forever()
        finally:
            leader.lost()
    timings = timings or leases.Timings()
    while True:
        try:
            async with writers.lock(
                client=client,
                cluster=cluster,
                holder=identity,
                wait=True,
                timings=timings,
                on_wait=lambda record: logger.info("following: Lease held by %s", record.describe()),
            ):
                logger.info("leading: holding Lease %s", writers.lease_ref(cluster))
                leader.gained(identity=identity)
                try:
                    await anyio.sleep_forever()
                finally:
                    leader.lost()
        except leases.Lost as err:
            logger.warning("lost the Lease, stopped writing: %s", err)
        except KubeError as err:
            logger.warning("leader election: %s; trying again in %gs", err, timings.retry_period)
            await anyio.sleep(timings.retry_period)


__all__ = ["Leader", "elect"]
