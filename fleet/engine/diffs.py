"""What applying would change: server-side-apply dry-runs compared with the live cluster.

The API server is the only exact judge of an apply (defaulting, admission, CEL
validation, field ownership), so a changed object is always previewed with a real
``dryRun=All`` apply, as ``kubectl diff --server-side`` and ``flux diff`` do. What
makes fleet fast is how few objects need one: live objects are *listed* (one
paginated request per kind, not a GET per object) and
``normalizations.unchanged_without_dry_run`` settles every object whose live state
already is what fleet would apply. Only the rest get a dry-run, concurrently.

Ledger entries the revision no longer declares come out as deletions (or as
skipped, with the reason, when the object is annotated to be kept or no longer
carries fleet's label). An entry fleet adopted rather than created, and a pool
Node, comes out as a release: fleet gives back what it set, the object stays.

A dry-run rejected only because immutable fields would change (every cause of the
API's ``Invalid`` status is an immutable-field cause) is a replace: delete, then
create. Any other rejection is an error, whatever its text says.
"""

from __future__ import annotations

import difflib
import io
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from ruamel.yaml import YAML

from fleet.engine import ledgers, normalizations, ownership
from fleet.engine.changesets import Action, Change
from fleet.engine.plans import Desired
from fleet.engine.stages import STAGES
from fleet.kube import Client, Conflict, Invalid, KubeError, NotFound, Ref
from fleet.kube.kinds import builtin as kinds_table

LiveIndex = dict[str, dict[str, Any]]
"""Live objects by ``Ref.key``."""
_STAGED = frozenset(kind for stage in STAGES for kind in stage.kinds)


async def live_index(*, client: Client, kinds: Iterable[tuple[str, str]]) -> LiveIndex:
    """Every live object of the given (apiVersion, kind)s, one paginated list per kind."""
    index: LiveIndex = {}

    async def fetch(api_version: str, kind: str) -> None:
        try:
            k = await client.kind(api_version=api_version, kind=kind)
        except NotFound:
            return  # a kind the server does not serve has no live objects
        for item in (await client.list(k)).items:
            index[Ref.of(item).key] = item

    async with anyio.create_task_group() as tg:
        for api_version, kind in sorted(set(kinds)):
            tg.start_soon(fetch, api_version, kind)
    return index


@dataclass(frozen=True)
class Prefetched:
    kinds: set[tuple[str, str]]
    live: LiveIndex


def staged_kinds() -> set[tuple[str, str]]:
    """(apiVersion, kind) of every kind the stage table applies."""
    return {(k.api_version, k.kind) for (_, kind), k in kinds_table().items() if kind in _STAGED}


async def prefetch(*, client: Client) -> Prefetched:
    """List every kind the stage table applies before the plan is known.

    The CLI runs this while it parses and validates the repository, so the API
    server's listing overlaps fleet's CPU work instead of following it.
    """
    kinds = staged_kinds()
    return Prefetched(kinds=kinds, live=await live_index(client=client, kinds=kinds))


class Settled:
    """What ``normalizations.unchanged_without_dry_run`` answered, kept between runs by a process
    that reconciles again and again (the controller): the answer is a pure function of the live
    object's version (uid, resourceVersion) and the desired content (its applied hash and field
    manager), so a repeated no-op re-derives nothing. Entries not asked for by the last run are
    dropped (``sweep``): it holds one cluster's worth."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str, str, str, str], bool] = {}
        self._asked: set[tuple[str, str, str, str, str]] = set()

    def unchanged(self, d: Desired, live: dict[str, Any]) -> bool:
        meta = live.get("metadata") or {}
        key = (
            d.ref.key,
            str(meta.get("uid", "")),
            str(meta.get("resourceVersion", "")),
            normalizations.annotation(d.obj, ownership.APPLIED),
            d.field_manager,
        )
        self._asked.add(key)
        found = self.answers.get(key)
        if found is None:
            found = self.answers[key] = _unchanged(d, live)
        return found

    def sweep(self) -> None:
        self.answers = {k: v for k, v in self.answers.items() if k in self._asked}
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
    preview_creations: bool = True,
    settled: Settled | None = None,
) -> list[Change]:
    """One Change per desired object: created, configured or unchanged (or skipped, with the error).

    ``preview_creations=False`` (apply, not diff) skips the dry-run of objects that do
    not exist yet: the apply that follows says everything the dry-run would have.
    ``settled`` remembers the no-dry-run answers between runs (see ``Settled``).
    """
    unchanged = settled.unchanged if settled is not None else _unchanged
    ignored = tuple(ignore_managers)
    changes: list[Change | None] = [None] * len(desired)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(i: int, d: Desired) -> None:
        async with limiter:
            changes[i] = await _diff_one(client=client, d=d, live=live.get(d.ref.key), ignored=ignored, force=force)

    # The pure test is CPU work over every object (about 1 s per 10,000): a worker thread keeps
    # the event loop free for the controller's Lease renewals, probes and webhooks.
    answers = await anyio.to_thread.run_sync(lambda: _answers(desired, live, unchanged))
    async with anyio.create_task_group() as tg:
        for i, d in enumerate(desired):
            current = live.get(d.ref.key)
            if answers[i]:
                changes[i] = Change(ref=d.ref, stage=d.stage.name, action=Action.UNCHANGED)
                continue
            if current is None and not preview_creations:
                changes[i] = Change(ref=d.ref, stage=d.stage.name, action=Action.CREATED)
                continue
            tg.start_soon(one, i, d)
    return [c for c in changes if c is not None]


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
    *, client: Client, d: Desired, live: dict[str, Any] | None, ignored: tuple[str, ...], force: bool
) -> Change:
    started = time.monotonic()
    stage = d.stage.name
    try:
        result = await client.apply(d.obj, field_manager=d.field_manager, dry_run=True, force=force or d.force)
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
        )
    except Invalid as err:
        if live is not None and err.immutable:
            # e.g. a ResourceClaimTemplate's spec: replace it, as Flux's force does.
            return Change(
                ref=d.ref,
                stage=stage,
                action=Action.CONFIGURED,
                replace=True,
                before=normalizations.normalise(live, ignore_managers=ignored),
                after=normalizations.normalise(d.obj),
                duration=time.monotonic() - started,
                reason="immutable fields change: replaced (delete, then create)",
            )
        return Change(
            ref=d.ref, stage=stage, action=Action.SKIPPED, error=str(err), duration=time.monotonic() - started
        )
    except KubeError as err:
        return Change(
            ref=d.ref, stage=stage, action=Action.SKIPPED, error=str(err), duration=time.monotonic() - started
        )
    after = normalizations.normalise(result, ignore_managers=ignored)
    duration = time.monotonic() - started
    if live is None:
        return Change(ref=d.ref, stage=stage, action=Action.CREATED, after=after, duration=duration)
    before = normalizations.normalise(live, ignore_managers=ignored)
    if _without_revision(before) == _without_revision(after):
        return Change(ref=d.ref, stage=stage, action=Action.UNCHANGED, duration=duration)
    return Change(
        ref=d.ref,
        stage=stage,
        action=Action.CONFIGURED,
        before=before,
        after=after,
        duration=duration,
        drift=_unchanged_in_git(d, live),
    )


def _unchanged_in_git(d: Desired, live: dict[str, Any] | None) -> bool:
    """The live object carries the hash of exactly this desired content: any difference is drift."""
    applied = normalizations.annotation(d.obj, ownership.APPLIED)
    return live is not None and bool(applied) and applied == normalizations.annotation(live, ownership.APPLIED)


def deletions(
    *, ledger: dict[str, ledgers.Entry], desired_keys: set[str], live: LiveIndex, stage_of: dict[str, str]
) -> list[Change]:
    """Ledger entries no longer desired: deleted, released (adopted, or a pool Node), or skipped with the reason."""
    out: list[Change] = []
    for key, entry in sorted(ledger.items()):
        if key in desired_keys:
            continue
        ref = Ref.from_key(key, version=entry.api_version.rpartition("/")[2])
        current = live.get(key)
        stage = stage_of.get(ref.kind, "")
        if current is None:
            continue  # already gone: only the ledger remains
        if ref.kind == "Node" or (entry.adopted and not ownership.kept(current)):
            what = "pool labels and taints" if ref.kind == "Node" else "adopted: fleet's labels, annotations and fields"
            out.append(
                Change(
                    ref=ref,
                    stage=stage,
                    action=Action.DELETED,
                    release=True,
                    before=normalizations.normalise(current),
                    after=None if ref.kind == "Node" else normalizations.normalise(_released(current)),
                    reason=f"{what} released (the {ref.kind} stays)",
                )
            )
        elif ownership.kept(current):
            out.append(
                Change(
                    ref=ref,
                    stage=stage,
                    action=Action.SKIPPED,
                    reason=f"annotated {ownership.KEEP}={ownership.KEEP_VALUE}",
                )
            )
        elif not ownership.managed(current):
            out.append(
                Change(
                    ref=ref,
                    stage=stage,
                    action=Action.SKIPPED,
                    reason=f"no longer labelled {ownership.MANAGED_BY}={ownership.MANAGER}",
                )
            )
        else:
            out.append(Change(ref=ref, stage=stage, action=Action.DELETED, before=normalizations.normalise(current)))
    return out


def _released(live: dict[str, Any]) -> dict[str, Any]:
    """``live`` as a release leaves it, near enough for a preview: without fleet's labels and annotations."""
    meta = dict(live.get("metadata") or {})
    for name in ("labels", "annotations"):
        kept = {k: v for k, v in (meta.get(name) or {}).items() if not k.startswith(ownership.DOMAIN + "/")}
        if name == "labels" and kept.get(ownership.MANAGED_BY) == ownership.MANAGER:
            del kept[ownership.MANAGED_BY]
        meta[name] = kept
    return {**live, "metadata": meta}


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


def unified(change: Change) -> str:
    """A unified diff of the change as YAML (``---``/``+++`` name the object)."""
    name = f"{change.ref.api_version}/{change.ref.kind} {change.ref.namespace + '/' if change.ref.namespace else ''}"
    name += change.ref.name
    before = _yaml(change.before).splitlines(keepends=True)
    after = _yaml(change.after).splitlines(keepends=True)
    if change.action == Action.DELETED and not change.release:
        after = []
    lines = difflib.unified_diff(before, after, fromfile=f"live {name}", tofile=f"merged {name}", n=3)
    return "".join(lines)


def _yaml(obj: dict[str, Any] | None) -> str:
    if obj is None:
        return ""
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    stream = io.StringIO()
    yaml.dump(obj, stream)
    return stream.getvalue()


__all__ = [
    "LiveIndex",
    "Prefetched",
    "Settled",
    "deletions",
    "diff_objects",
    "live_index",
    "prefetch",
    "staged_kinds",
    "unified",
    "with_live_revision",
]
