"""What applying would change: server-side-apply dry-runs compared with the live cluster.

The API server is the only exact judge of an apply (defaulting, admission, CEL
validation, field ownership), so a changed object is always previewed with a real
``dryRun=All`` apply, as ``kubectl diff --server-side`` and ``flux diff`` do, and
what a diff shows is the server's answer, never fleet's guess: a defaulted field
(a claim request's ``allocationMode: ExactCount``) stays in the preview because it
stays in the cluster. What makes fleet fast is how few objects need one: live
objects are *listed* (``listings``) and ``normalizations.unchanged_without_dry_run``
settles every object whose live state already is what fleet would apply. Only the
rest get a dry-run, concurrently.

An apply sends no dry-run where the write that follows would answer everything the
dry-run could: an object that does not exist yet, and an object ``fleetctl import``
handed over (``handover``) that fleet's manager has never written and that lacks
fleet's marks (``normalizations.first_apply_changes``). The import read it and wrote
the repository from it, so the forced apply that takes it over sends the same body
and changes the object for certain; a preview still dry-runs it.

A diff never stops at the first surprise. When another field manager owns a field
fleet sets, a preview (``preview=True``) records the conflicts on the Change (who
owns which field) and shows what a forced apply would make of the object. Under the
object's drift policy ``enforce`` the apply does the same and marks the Change
``forced``: git wins on the fields fleet declares, and only the objects that conflict
are applied with force (fields fleet does not declare are never touched by SSA).
Otherwise the apply (``preview=False``) fails that object with the server's message.

A dry-run rejected only because immutable fields would change (every cause of the
API's ``Invalid`` status is an immutable-field cause) is a replace: delete, then
create. Any other rejection is an error, whatever its text says. The replacement is
previewed by dry-running its creation under a temporary name, so the merged side
is again what the server would store.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Iterable
from typing import Any

import anyio
import anyio.to_thread

from fleet.engine import impersonations, normalizations, ownership, workers
from fleet.engine.changesets import Action, Change, FieldConflict
from fleet.engine.listings import LiveIndex
from fleet.engine.plans import Desired
from fleet.kube import Client, Conflict, Forbidden, Invalid, KubeError, NotFound
from fleet.lrus import LRU

_Key = tuple[str, str, str, str, str]
_NO_METADATA: dict[str, Any] = {}
"""An answer's key: the object, its live uid and resourceVersion, the desired content's hash, the field manager."""


class Settled:
    """What ``normalizations.unchanged_without_dry_run`` answered, kept between runs by a process
    that reconciles again and again (the controller): the answer is a pure function of the live
    object's version (uid, resourceVersion) and the desired content (its applied hash and field
    manager), so a repeated no-op re-derives nothing.

    Every status update of a managed object (a Node's heartbeat, a quota's usage) is a new
    resourceVersion and so a new key: the engine's one driver (``fleet.engine.drives``) sweeps
    after every run, keeping only what that run asked, and the ``LRU`` bounds it in any case."""

    LIMIT = 250_000
    """More than the largest fleet tested (100,000 objects): a sweep, not the limit, keeps it small."""

    def __init__(self, *, limit: int = LIMIT) -> None:
        self.answers: LRU[_Key, bool] = LRU(limit)
        self._asked: set[_Key] = set()

    def __len__(self) -> int:
        return len(self.answers)

    def unchanged(self, d: Desired, live: dict[str, Any]) -> bool:
        meta = live.get("metadata") or _NO_METADATA
        key = (d.ref.key, meta.get("uid") or "", meta.get("resourceVersion") or "", d.applied, d.field_manager)
        asked = self._asked
        if len(asked) >= self.answers.limit:
            asked.clear()  # a run larger than the limit: the LRU alone bounds what is kept
        asked.add(key)
        found = self.answers.get(key)
        if found is None:
            found = self.answers[key] = _unchanged(d, live)
        return found

    def sweep(self) -> None:
        """Keep only the answers the runs since the last sweep asked for."""
        asked = self._asked
        self.answers.retain(asked.__contains__)
        self._asked = set()


def _unchanged(d: Desired, live: dict[str, Any]) -> bool:
    return normalizations.unchanged_without_dry_run(
        with_live_revision(d.obj, live), live, manager=d.field_manager, wanted=d.leaves
    )


async def diff_objects(
    *,
    client: Client,
    desired: list[Desired],
    live: LiveIndex,
    concurrency: int = 16,
    ignore_managers: Iterable[str] = (),
    force: bool = False,
    preview: bool = True,
    settled: Settled | None = None,
    identities: impersonations.Identities | None = None,
    handover: Collection[str] = (),
    drift_policy: str | None = None,
) -> list[Change]:
    """One Change per desired object: created, configured or unchanged (or skipped, with the error).

    ``preview=True`` (a diff, a dry-run apply) dry-runs the creation of objects that
    do not exist yet and turns field conflicts into listed ``conflicts`` beside the
    forced result. ``preview=False`` (an apply) skips dry-running creations — the
    apply that follows says everything the dry-run would have — and fails an object
    on a conflict, as the apply would. ``settled`` remembers the no-dry-run answers
    between runs (see ``Settled``). ``identities`` says as whom each team object is dry-run
    (``fleet.engine.impersonations``): a refusal of the API server is a refused entry naming the
    object's file:line. ``handover`` (``Ref.key``s, ``Options.handover``): objects an apply takes
    over from ``fleetctl import`` without a dry-run where it cannot change the answer. ``drift_policy``
    (``Options.drift_policy``) replaces the policy of objects left at the default.
    """
    identities = identities or impersonations.Identities()
    unchanged = settled.unchanged if settled is not None else _unchanged
    ignored = tuple(ignore_managers)
    changes: list[Change | None] = [None] * len(desired)

    async def one(i: int) -> None:
        d = desired[i]
        if drift_policy is not None and d.drift == "enforce" and drift_policy != d.drift:
            d = d.copied(drift=drift_policy)
        who = impersonations.identity(identities, d.team, d.ref.namespace)
        change = await _diff_one(
            client=client.impersonating(who.dry_run),
            d=d,
            live=live.get(d.ref.key),
            ignored=ignored,
            force=force,
            preview=preview,
        )
        note = who.note or who.as_fleet
        changes[i] = change.replaced(reason=note) if note and not change.reason else change

    # The pure test is CPU work over every object: a worker thread keeps
    # the event loop free for the controller's Lease renewals, probes and webhooks.
    answers = await anyio.to_thread.run_sync(lambda: _answers(desired, live, unchanged))
    asked: list[int] = []
    for i, d in enumerate(desired):
        if answers[i]:
            changes[i] = Change.unchanged(d.ref, d.stage.name)
        elif live.get(d.ref.key) is None and not preview:
            changes[i] = Change(ref=d.ref, stage=d.stage.name, action=Action.CREATED)
        elif not preview and d.ref.key in handover and _taken_over(d, live[d.ref.key]):
            changes[i] = Change(ref=d.ref, stage=d.stage.name, action=Action.CONFIGURED)
        else:
            asked.append(i)
    await workers.for_each(asked, one, concurrency=concurrency)
    return [c for c in changes if c is not None]


def _taken_over(d: Desired, live: dict[str, Any]) -> bool:
    return normalizations.first_apply_changes(d.obj, live, manager=d.field_manager)


def _answers(
    desired: list[Desired], live: LiveIndex, unchanged: Callable[[Desired, dict[str, Any]], bool]
) -> list[bool]:
    """For each desired object: live already is what applying it would make (no dry-run needed)."""
    out: list[bool] = []
    for d in desired:
        current = live.get(d.ref.key)
        out.append(current is not None and unchanged(d, current))
    return out


async def _diff_one(
    *, client: Client, d: Desired, live: dict[str, Any] | None, ignored: tuple[str, ...], force: bool, preview: bool
) -> Change:
    started = time.monotonic()
    stage = d.stage.name
    conflicts: tuple[FieldConflict, ...] = ()
    enforce = d.drift == "enforce" and live is not None
    try:
        try:
            result = await client.apply(d.obj, field_manager=d.field_manager, dry_run=True, force=force or d.force)
        except Conflict as err:
            if not (err.fields and (preview or enforce)):
                raise
            # Show what the forced apply would make of it, and list whose fields it takes (under
            # ``enforce`` the apply takes them: git wins on the fields fleet declares).
            conflicts = tuple(FieldConflict(manager=m, field=f) for m, f in err.fields)
            result = await client.apply(d.obj, field_manager=d.field_manager, dry_run=True, force=True)
    except NotFound as err:
        if live is None:  # its namespace is created by an earlier stage of the same apply
            return Change(
                ref=d.ref,
                stage=stage,
                action=Action.CREATED,
                after=normalizations.normalise(d.obj),
                duration=time.monotonic() - started,
                reason=f"not dry-run: {err.what}",
            )
        return Change(ref=d.ref, stage=stage, action=Action.SKIPPED, error=str(err))
    except Conflict as err:
        return Change(
            ref=d.ref,
            stage=stage,
            action=Action.SKIPPED,
            error=str(err),
            drift=_unchanged_in_git(d, live),
            duration=time.monotonic() - started,
            conflicts=tuple(FieldConflict(manager=m, field=f) for m, f in err.fields),
        )
    except Invalid as err:
        if live is not None and err.immutable:
            # e.g. a ResourceClaimTemplate's spec: replace it, as Flux's force does.
            return await _replacement(client=client, d=d, live=live, ignored=ignored, started=started)
        return Change(
            ref=d.ref, stage=stage, action=Action.SKIPPED, error=str(err), duration=time.monotonic() - started
        )
    except Forbidden as err:
        if client.user:  # the team may not write this: a refusal, shown with where it is declared
            return impersonations.refused(d, user=client.user, err=err)
        return Change(
            ref=d.ref, stage=stage, action=Action.SKIPPED, error=str(err), duration=time.monotonic() - started
        )
    except KubeError as err:
        return Change(
            ref=d.ref, stage=stage, action=Action.SKIPPED, error=str(err), duration=time.monotonic() - started
        )
    change = _compared(d=d, live=live, result=result, ignored=ignored, started=started)
    if conflicts and enforce:  # another manager changed a field fleet declares: the cluster drifted
        return change.replaced(conflicts=conflicts, forced=True, drift=True)
    return change.replaced(conflicts=conflicts) if conflicts else change


def _compared(
    *, d: Desired, live: dict[str, Any] | None, result: dict[str, Any], ignored: tuple[str, ...], started: float
) -> Change:
    """The Change from a dry-run ``result``: created, or configured/unchanged against ``live``."""
    after = normalizations.normalise(result, ignore_managers=ignored)
    duration = time.monotonic() - started
    if live is None:
        return Change(ref=d.ref, stage=d.stage.name, action=Action.CREATED, after=after, duration=duration)
    before = normalizations.normalise(live, ignore_managers=ignored)
    if _without_revision(before) == _without_revision(after):
        return Change(ref=d.ref, stage=d.stage.name, action=Action.UNCHANGED, duration=duration)
    return Change(
        ref=d.ref,
        stage=d.stage.name,
        action=Action.CONFIGURED,
        before=before,
        after=after,
        duration=duration,
        drift=_unchanged_in_git(d, live),
    )


async def _replacement(
    *, client: Client, d: Desired, live: dict[str, Any], ignored: tuple[str, ...], started: float
) -> Change:
    """A change to immutable fields: configured with replace, the merged side as the server would create it.

    The object cannot be dry-run applied in place (that is the error), so its creation
    is dry-run under a temporary name and the name put back: defaults and admission
    are the server's, as for every other preview.
    """
    name = d.ref.name
    probe = {**d.obj, "metadata": {**d.obj["metadata"], "name": _temporary_name(name)}}
    try:
        created = await client.apply(probe, field_manager=d.field_manager, dry_run=True, force=True)
    except KubeError as err:
        return Change(
            ref=d.ref, stage=d.stage.name, action=Action.SKIPPED, error=str(err), duration=time.monotonic() - started
        )
    created["metadata"]["name"] = name
    after = normalizations.normalise(created, ignore_managers=ignored)
    before = normalizations.normalise(live, ignore_managers=ignored)
    _without_revision(before)
    _without_revision(after)
    return Change(
        ref=d.ref,
        stage=d.stage.name,
        action=Action.CONFIGURED,
        replace=True,
        before=before,
        after=after,
        duration=time.monotonic() - started,
        drift=_unchanged_in_git(d, live),
        reason="immutable fields change: replaced (delete, then create)",
    )


def _temporary_name(name: str) -> str:
    """A valid, unused name for a dry-run creation (DNS label: 63 characters at most)."""
    return f"fleet-preview-{uuid.uuid4().hex[:12]}-{name}"[:63].rstrip("-.")


def _unchanged_in_git(d: Desired, live: dict[str, Any] | None) -> bool:
    """The live object carries the hash of exactly this desired content: any difference is drift."""
    applied = d.applied
    return live is not None and bool(applied) and applied == normalizations.annotation(live, ownership.APPLIED)


def with_live_revision(obj: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """``obj`` carrying the live revision annotation, so a revision-only change is no change."""
    live_rev = ((live.get("metadata") or {}).get("annotations") or {}).get(ownership.REVISION)
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if not live_rev or ownership.REVISION not in annotations or annotations[ownership.REVISION] == live_rev:
        return obj
    meta = dict(obj["metadata"])
    meta["annotations"] = {**annotations, ownership.REVISION: live_rev}
    return {**obj, "metadata": meta}


def _without_revision(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """``obj`` without fleet's bookkeeping annotations (revision, applied hash): never a change by itself."""
    if obj is None:
        return None
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    annotations.pop(ownership.REVISION, None)
    annotations.pop(ownership.APPLIED, None)
    if not annotations:
        meta.pop("annotations", None)
    return obj


__all__ = ["Settled", "diff_objects", "with_live_revision"]
