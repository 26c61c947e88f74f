"""Leases: one holder at a time, decided by the API server's optimistic concurrency.

A ``coordination.k8s.io/v1`` Lease names its holder (``holderIdentity``), when the
holder took it (``acquireTime``) and last renewed it (``renewTime``), how long a
renewal counts (``leaseDurationSeconds``) and how often it changed hands
(``leaseTransitions``). This module is the mechanics, the same as client-go's
``tools/leaderelection`` with a Lease lock, for whoever must be the only one doing
something: ``fleetctl apply`` and the controller's leader election both hold one
through ``fleet.engine.writers``.

- **Never a blind write.** Acquiring, renewing and releasing are updates that carry
  the ``resourceVersion`` just read (or a create when there is no Lease yet). Of two
  candidates racing from the same read the server lets exactly one through; the
  other gets 409, reads again and finds the Lease held.
- **Free** means released (no holder) or expired. Expiry is judged as client-go
  does: by how long *this* process has seen the record unchanged, on its own
  monotonic clock, counted from the renewal itself rather than from when this
  process happened to read it. When a record is first seen, its ``renewTime`` says
  how long ago it was written; that age is trusted up to ``SKEW`` (1 s), so a clock
  running ahead by more than that makes a candidate early by at most ``SKEW``,
  well inside the margin between the holder's renew deadline and the duration.
  A follower that watched the renewal therefore takes over exactly one duration
  after the holder's last renewal: at most one duration after the holder died.
  A one-shot command would still wait a whole duration for a holder that died long
  ago, so a record whose ``renewTime`` is more than twice its duration old by this
  machine's clock counts as expired too (clocks must agree within one duration).
- **Holding** (``hold``) renews every retry period in a background task. When no
  renewal succeeds within the renew deadline, or the Lease turns out to have another
  holder, the Lease is lost and the work under it is cancelled at once, before any
  candidate may take it over (candidates wait a whole duration, longer than the
  deadline). The ``hold`` then raises ``Lost``.
- **Releasing** clears the holder on the way out (also on cancellation, shielded).
  A waiting candidate watches the Lease between its tries, so it takes a released
  Lease within a request's latency, not at its next try nor after a duration; and
  it tries again at the moment the Lease expires, not at the next retry period.

``Timings`` default to controller-runtime's leader election: 15 s duration, 10 s
renew deadline, 2 s retry period.

    FleetError
     ├── Held   the Lease has another holder (``record``: who, since when)
     └── Lost   the holder could not renew in time, or found another holder
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import anyio

from fleet.errors import FleetError, unwrapped
from fleet.kube import timestamps
from fleet.kube.clients import Client
from fleet.kube.errors import Conflict, KubeError, NotFound
from fleet.kube.kinds import Ref
from fleet.telemetry import tracing

logger = logging.getLogger(__name__)

API_VERSION = "coordination.k8s.io/v1"
ATTEMPTS = 5
"""Reads and writes of one acquire, renew or release that lost a race (409) before giving up."""
SKEW = 1.0
"""Seconds of a record's age (by its ``renewTime``) an observer trusts: how far clocks may disagree
before a candidate could take over early, and then by at most this much (the holder stops writing
``duration - renew_deadline`` = 5 s before anyone may take over)."""


@dataclass(frozen=True)
class Timings:
    """How long a renewal counts, how long a holder keeps trying to renew, how often anyone tries."""

    duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.duration:
            raise ValueError("lease timings need 0 < retry_period < renew_deadline < duration")


@dataclass(frozen=True)
class Record:
    """What a Lease says, and the resourceVersion it said it at."""

    holder: str = ""
    acquired: datetime | None = None
    renewed: datetime | None = None
    duration: int = 15
    transitions: int = 0
    resource_version: str = ""
    lease: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The Lease object as read (its metadata is kept on update)."""

    @classmethod
    def of(cls, lease: dict[str, Any]) -> Record:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            acquired=timestamps.parse(spec.get("acquireTime")),
            renewed=timestamps.parse(spec.get("renewTime")),
            duration=int(spec.get("leaseDurationSeconds") or 0),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
            lease=lease,
        )

    def describe(self, *, now: datetime | None = None) -> str:
        """``alice@laptop:4242 since 2026-12-02T16:40:03Z (renewed 1s ago)``."""
        since = f" since {self.acquired.strftime('%Y-%m-%dT%H:%M:%SZ')}" if self.acquired else ""
        renewed = ""
        if self.renewed:
            age = max(0.0, ((now or datetime.now(UTC)) - self.renewed).total_seconds())
            renewed = f" (renewed {age:.0f}s ago)"
        return f"{self.holder or 'nobody'}{since}{renewed}"


class Held(FleetError):
    """Another holder has the Lease; ``record`` says who and since when."""

    def __init__(self, what: str, *, record: Record, where: str = "", hint: str = "") -> None:
        super().__init__(what, where=where, hint=hint)
        self.record = record


class Lost(FleetError):
    """The holder could not renew within the renew deadline, or found another holder."""


class Observer:
    """When this process saw each record of one Lease renewed: client-go's ``observedTime``.

    Counted from the renewal, not from this process's read: the record's age by its
    ``renewTime`` is subtracted, but never more than ``SKEW`` (a clock ahead of the
    holder's cannot make this candidate earlier than that) and never less than zero.
    """

    def __init__(self) -> None:
        self._version = ""
        self._since = 0.0

    def _see(self, record: Record) -> None:
        if record.resource_version == self._version:
            return
        age = 0.0
        if record.renewed is not None:
            age = min(max((datetime.now(UTC) - record.renewed).total_seconds(), 0.0), SKEW)
        self._version, self._since = record.resource_version, time.monotonic() - age

    def remaining(self, record: Record) -> float:
        """Seconds until ``record`` expires by this process's clock (0 when it has)."""
        self._see(record)
        if record.duration <= 0:
            return 0.0
        if record.renewed is not None and (datetime.now(UTC) - record.renewed).total_seconds() > 2 * record.duration:
            return 0.0
        return max(0.0, self._since + record.duration - time.monotonic())

    def expired(self, record: Record) -> bool:
        return self.remaining(record) <= 0.0


@dataclass
class Holding:
    """A Lease this process holds; ``record`` follows every renewal."""

    ref: Ref
    identity: str
    record: Record


async def read(*, client: Client, ref: Ref) -> Record | None:
    """The Lease ``ref`` says, or None when there is no such Lease."""
    try:
        return Record.of(await client.get(ref))
    except NotFound:
        return None


async def try_acquire(
    *, client: Client, ref: Ref, identity: str, timings: Timings, observer: Observer | None = None
) -> Record:
    """Take the Lease if it is free (or already ours); ``Held`` naming the holder otherwise."""
    observer = observer or Observer()
    for _ in range(ATTEMPTS):
        now = datetime.now(UTC)
        current = await read(client=client, ref=ref)
        if current is None:
            mine = Record(holder=identity, acquired=now, renewed=now, duration=round(timings.duration))
            try:
                return Record.of(await client.create(_body(ref, mine), field_manager=_MANAGER))
            except Conflict:
                continue  # created by somebody else since the read
        expired = observer.expired(current)
        if current.holder and current.holder != identity and not expired:
            raise Held(
                f"Lease {ref.namespace}/{ref.name} is held by {current.describe(now=now)}",
                record=current,
                where=str(ref),
                hint="wait until its holder releases it, or until it expires",
            )
        ours = current.holder == identity
        mine = replace(
            current,
            holder=identity,
            acquired=current.acquired if ours and current.acquired else now,
            renewed=now,
            duration=round(timings.duration),
            transitions=current.transitions + (0 if ours else 1),
        )
        try:
            return Record.of(await client.update(_body(ref, mine), field_manager=_MANAGER))
        except Conflict:
            continue  # changed since the read: read again
    raise Conflict(
        f"Lease {ref.namespace}/{ref.name} changed between every read and write of {ATTEMPTS} attempts",
        where=str(ref),
        hint="other candidates are racing for it; try again",
    )


async def acquire(
    *,
    client: Client,
    ref: Ref,
    identity: str,
    timings: Timings,
    wait: bool = False,
    on_wait: Callable[[Record], None] | None = None,
) -> Record:
    """``try_acquire``; with ``wait``, try again whenever the Lease changes, at least every retry period.

    One span, ``acquire lease``, with the holder found when this had to wait.
    """
    observer = Observer()
    waited = False
    attributes = {tracing.KIND: "Lease", tracing.NAMESPACE: ref.namespace, tracing.NAME: ref.name}
    with tracing.tracer().start_as_current_span("acquire lease", attributes=attributes) as span:
        while True:
            try:
                got = await try_acquire(client=client, ref=ref, identity=identity, timings=timings, observer=observer)
                span.set_attribute("fleet.lease.transitions", got.transitions)
                return got
            except Held as held:
                span.set_attribute("fleet.lease.holder", held.record.holder)
                if not wait:
                    raise
                if on_wait is not None and not waited:
                    on_wait(held.record)
                waited = True
                # Try again when the Lease changes, when it expires, or after a retry period.
                period = min(timings.retry_period, observer.remaining(held.record) + 0.001)
                await _changed(client=client, ref=ref, since=held.record.resource_version, period=period)


async def _changed(*, client: Client, ref: Ref, since: str, period: float) -> None:
    """Return when the Lease changes after ``since`` (a watch event), or after ``period`` at the latest.

    A released Lease is then taken within a request's latency, not at the next retry
    period; expiry, which no event announces, is still checked every ``period``. If
    the Lease cannot be watched (RBAC, an old resourceVersion), this simply sleeps.
    """
    with anyio.move_on_after(period):
        try:
            kind = await client.kind(api_version=API_VERSION, kind="Lease")
            params = {
                "watch": "1",
                "fieldSelector": f"metadata.name={ref.name}",
                "resourceVersion": since,
                "timeoutSeconds": str(max(1, math.ceil(period))),
            }
            async with client.stream(
                "GET", kind.path(namespace=ref.namespace), verb="watch", params=params, read_timeout=period + 5
            ) as response:
                async for line in response.aiter_lines():
                    if line.strip():
                        return
        except KubeError as err:
            logger.debug("cannot watch %s, polling instead: %s", ref, err)
        await anyio.sleep_forever()  # the rest of the period


async def renew(*, client: Client, holding: Holding, timings: Timings) -> Record:
    """Renew a held Lease; ``Lost`` when it has another holder or no longer exists."""
    record = holding.record
    for _ in range(ATTEMPTS):
        mine = replace(record, renewed=datetime.now(UTC), duration=round(timings.duration))
        try:
            return Record.of(await client.update(_body(holding.ref, mine), field_manager=_MANAGER))
        except Conflict:
            current = await read(client=client, ref=holding.ref)
            if current is None or current.holder != holding.identity:
                raise Lost(
                    f"Lease {holding.ref.namespace}/{holding.ref.name} was taken over by "
                    f"{current.describe() if current else 'nobody (it was deleted)'}",
                    where=str(holding.ref),
                ) from None
            record = current  # our own earlier write went through (a retried request): renew from it
        except NotFound:
            raise Lost(
                f"Lease {holding.ref.namespace}/{holding.ref.name} was deleted while held", where=str(holding.ref)
            ) from None
    raise Lost(f"Lease {holding.ref.namespace}/{holding.ref.name} changes under every renewal", where=str(holding.ref))


async def release(*, client: Client, holding: Holding) -> None:
    """Clear the holder, so a waiting candidate takes over at its next try; a Lease no longer ours is left alone."""
    record = holding.record
    for _ in range(ATTEMPTS):
        free = replace(record, holder="", renewed=datetime.now(UTC))
        try:
            holding.record = Record.of(await client.update(_body(holding.ref, free), field_manager=_MANAGER))
            return
        except Conflict:
            current = await read(client=client, ref=holding.ref)
            if current is None or current.holder != holding.identity:
                return
            record = current
        except NotFound:
            return


@asynccontextmanager
async def hold(
    *,
    client: Client,
    ref: Ref,
    identity: str,
    timings: Timings | None = None,
    wait: bool = False,
    on_wait: Callable[[Record], None] | None = None,
) -> AsyncIterator[Holding]:
    """Acquire the Lease (``Held``, or with ``wait`` queue), renew it while the body runs, release it after.

    If the Lease is lost, the body is cancelled at once and ``Lost`` is raised in
    its place. Exceptions of the body pass through unchanged.
    """
    timings = timings or Timings()
    holding = Holding(
        ref=ref,
        identity=identity,
        record=await acquire(client=client, ref=ref, identity=identity, timings=timings, wait=wait, on_wait=on_wait),
    )
    body = anyio.CancelScope()
    lost: list[Lost] = []
    try:
        with unwrapped():
            async with anyio.create_task_group() as tg:
                tg.start_soon(_keep, client, holding, timings, body, lost)
                try:
                    with body:
                        yield holding
                finally:
                    tg.cancel_scope.cancel()
    except Exception as failure:
        if lost:
            raise lost[0] from failure
        raise
    finally:
        if not lost:
            with anyio.CancelScope(shield=True), anyio.move_on_after(timings.renew_deadline):
                try:
                    await release(client=client, holding=holding)
                except KubeError as err:  # it expires on its own
                    logger.warning("could not release %s: %s", ref, err)
    if lost:
        raise lost[0]


async def _keep(client: Client, holding: Holding, timings: Timings, body: anyio.CancelScope, lost: list[Lost]) -> None:
    """Renew every retry period; past the renew deadline without success, cancel ``body``."""
    renewed = time.monotonic()
    failure = ""
    while True:
        await anyio.sleep(timings.retry_period)
        left = renewed + timings.renew_deadline - time.monotonic()
        try:
            with anyio.fail_after(max(left, 0.0)):
                holding.record = await renew(client=client, holding=holding, timings=timings)
            renewed, failure = time.monotonic(), ""
        except Lost as err:
            lost.append(err)
        except (KubeError, TimeoutError) as err:
            failure = err.what if isinstance(err, KubeError) else failure or "no answer in time"
            if time.monotonic() - renewed < timings.renew_deadline:
                logger.info("renewing %s failed, trying again: %s", holding.ref, failure)
                continue
            lost.append(
                Lost(
                    f"could not renew Lease {holding.ref.namespace}/{holding.ref.name} within "
                    f"{timings.renew_deadline:g}s ({failure}); stopped writing",
                    where=str(holding.ref),
                    hint="check the connection to the API server and the rights on leases, then run again",
                )
            )
        if lost:
            body.cancel()
            return


_MANAGER = "fleet-lease"


def _body(ref: Ref, record: Record) -> dict[str, Any]:
    """The Lease to write: as read (metadata, resourceVersion) with ``record``'s spec."""
    spec: dict[str, Any] = {"leaseDurationSeconds": record.duration, "leaseTransitions": record.transitions}
    if record.holder:
        spec["holderIdentity"] = record.holder
    if record.acquired:
        spec["acquireTime"] = _format(record.acquired)
    if record.renewed:
        spec["renewTime"] = _format(record.renewed)
    meta = dict(record.lease.get("metadata") or {"name": ref.name, "namespace": ref.namespace})
    meta.pop("managedFields", None)
    return {"apiVersion": API_VERSION, "kind": "Lease", "metadata": meta, "spec": spec}


def _format(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # MicroTime


__all__ = [
    "API_VERSION",
    "ATTEMPTS",
    "SKEW",
    "Held",
    "Holding",
    "Lost",
    "Observer",
    "Record",
    "Timings",
    "acquire",
    "hold",
    "read",
    "release",
    "renew",
    "try_acquire",
]
