"""The pipeline every command and the controller share: checkout → validate → resolve → plan.

A revision that fails validation is never rendered, diffed or applied (docs/architecture.md):
``load_plan`` raises a FleetError listing the findings. Validation here is ``fleetctl
validate``'s, including satisfiability on the devices the cluster's GPUNodePools declare
(``fleet.policy.declarations``): a selector matching nothing, a misspelt attribute or CEL
failing at run time on a declared device is refused before anything is written. The revision id is
``fleet.source.revision_id``: the commit the checkout is at, with a hash of the loaded
content when the work tree differs from it (a resumed run must never skip a stage of
different content), or that hash alone outside git.

``connect`` uses the given context, else the Cluster's ``spec.context``, else the
kubeconfig's current context. ``plan_and_list`` lists the live objects while the
repository is parsed and validated in a worker thread (loading is CPU work: it must
never run on the event loop); a writer calls it once it holds the cluster's Lease.
``plan_and_connect`` is both, for readers.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import itertools
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from opentelemetry import trace

from fleet import kube
from fleet.engine import listings, plancaches, plans
from fleet.errors import FleetError
from fleet.manifests.caches import ParseCache, TreeCache
from fleet.manifests.findings import Finding
from fleet.manifests.limits import Limits
from fleet.manifests.trees import loadable, read_changed, read_tree
from fleet.manifests.yamls import parse
from fleet.source import revision_id
from fleet.telemetry import tracing

if TYPE_CHECKING:
    from fleet.source import Changed


def tune_gc() -> None:
    """Collect the young generation only: a run builds tens of thousands of long-lived dicts
    (manifests, desired and live objects) that the cyclic collector would otherwise re-scan
    again and again for nothing. Reference counting still frees everything acyclic at once;
    cycles are found in the young generations. (The controller, whose full collections would
    stall its event loop, keeps its own policy: ``fleet.controller.heaps``.)"""
    gc.set_threshold(50_000, 50, 1000)


_paused = 0
_paused_lock = threading.Lock()
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic cyclic collection in a process that ends after one run (fleetctl) while it
    loads, validates and plans (any thread); what was made meanwhile is frozen after.

    All of that lives until the process ends (the files' data, the models, the plan) and it
    makes almost no cyclic garbage, yet every collection of an older generation would re-scan
    all of it, and the first young collection after the pause would scan everything made in it.
    Frozen (``gc.freeze``), it is out of the collector's sight; reference counting still frees
    it. Not for listing: each page's response stays in a reference cycle until a collection, so
    a listing under the pause peaks higher. Nested and concurrent uses are
    counted: the collector runs again when the last one ends, if it ran before the first. (The
    controller, which lives for months, has its own policy: ``fleet.controller.heaps``.)
    """
    global _paused, _resume
    with _paused_lock:
        if _paused == 0:
            _resume = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0:
                gc.freeze()
                if _resume:
                    gc.enable()


@dataclass
class LoadCache:
    """What a long-running process (the controller) keeps between loads of one repository.

    ``tree``: a file whose stat did not change is not read again (``fleet.manifests.TreeCache``).
    ``last``: the files read at the last revision, from which the next revision's are made by
    reading only what git says changed (``fleet.source.Changed``): a commit's read does not
    walk the whole tree. ``digests``: each file's hash for the plan store's key, per content.
    ``parsed``: each file is parsed once per content (``fleet.manifests.ParseCache``).
    ``increments``: the last check, from which the next is made by redoing only what the changed
    files reach (``fleet.engine.increments``); an unchanged repository at the same revision gets
    the same plan back. Each holds one repository's worth (``len`` of each: its entries).
    """

    parsed: ParseCache = field(default_factory=ParseCache)
    tree: TreeCache = field(default_factory=TreeCache)
    increments: Any = None
    """A ``fleet.engine.increments.Increments`` once a load made one (imported with the models)."""
    last: tuple[str, dict[str, bytes]] | None = None
    digests: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)
    whole_reads: int = 0
    changed_reads: int = 0

    def sizes(self) -> dict[str, int]:
        """Entries per cache, for ``fleet_cache_entries``."""
        return {
            "tree": len(self.tree),
            "parsed": len(self.parsed),
            "increments": len(self.increments or ()),
            "last": len(self.last[1]) if self.last else 0,
            "digests": len(self.digests),
        }


def _read(
    repo: Path, *, cache: LoadCache | None, revision: str | None, changed: Changed | None
) -> tuple[dict[str, bytes], list[Finding]]:
    """The checkout's files and the findings about files not read: only the changed files when the
    cache holds the files of the commit ``changed`` is relative to, else the whole tree."""
    if cache is None:
        return read_tree(repo, limits=Limits())
    last = cache.last
    span = trace.get_current_span()
    if changed is not None and revision and last is not None and last[0] == changed.since:
        files = read_changed(repo, files=last[1], paths=changed.paths, limits=Limits())
        if files is not None:
            cache.last = (revision, files)
            cache.changed_reads += 1
            span.set_attribute("fleet.read", f"{len(changed.paths)} changed")
            return files, []
    cache.tree.begin(now=time.time())
    files, problems = read_tree(repo, limits=Limits(), cache=cache.tree)
    cache.whole_reads += 1
    span.set_attribute("fleet.read", "tree")
    cache.last = (revision, files) if revision and not problems and not cache.tree.linked else None
    return files, problems


def _digest(files: dict[str, bytes], *, memo: dict[str, tuple[bytes, bytes]] | None = None) -> bytes:
    """A hash of the files' names and contents; ``memo`` keeps each file's hash per content object."""
    h = hashlib.blake2b(digest_size=20)
    for name in sorted(files):
        content = files[name]
        found = memo.get(name) if memo is not None else None
        if found is None or found[0] is not content:
            found = (content, hashlib.blake2b(content, digest_size=16).digest())
            if memo is not None:
                memo[name] = found
        h.update(os.fsencode(name) + b"\0" + found[1])
    if memo is not None and len(memo) > len(files):
        for name in [n for n in memo if n not in files]:
            del memo[name]
    return h.digest()


@dataclass(frozen=True)
class Checked:
    """A checkout validated for one cluster: its plan, or the error findings that refuse it."""

    revision: str
    plan: plans.Plan | None
    findings: tuple[Finding, ...] = ()
    unstored: str = ""
    """With ``defer_store``: the store's key for the plan made here, which the caller stores
    (``store_plan``) once it has applied it; "" when nothing is left to store."""


def check_and_plan(
    repo: Path,
    *,
    cluster: str,
    revision: str | None = None,
    cache: LoadCache | None = None,
    store: plancaches.PlanCache | None = None,
    changed: Changed | None = None,
    defer_store: bool = False,
) -> Checked:
    """Validate ``repo`` for ``cluster`` and plan it if it validates (CPU work: run it in a thread).

    ``revision`` names the checkout when the caller knows it (the controller's git
    source); otherwise it is ``revision_id``. With a ``cache`` (kept by the caller
    between calls), unchanged files are not read or parsed again and an unchanged
    repository is not validated or planned again; the cached manifests' position maps
    are released once the load is checked (``ParseCache.release``). With a ``store``,
    a plan another process made of the same content is taken from disk, and a plan
    made here is put there (``fleet.engine.plancaches``), or, with ``defer_store``, left for
    the caller to put there after applying it (``Checked.unstored``, ``store_plan``): pickling
    10,000 objects is no part of a commit's way to the cluster. ``changed`` (the git source's,
    with ``revision`` and a ``cache``) lets the read skip the files that did not change.
    """
    checked = _check_and_plan(repo, cluster=cluster, revision=revision, cache=cache, store=store, changed=changed)
    if checked.unstored and not defer_store:
        store_plan(store, checked)
        checked = dataclasses.replace(checked, unstored="")
    return checked


def _check_and_plan(
    repo: Path,
    *,
    cluster: str,
    revision: str | None,
    cache: LoadCache | None,
    store: plancaches.PlanCache | None,
    changed: Changed | None = None,
) -> Checked:
    require_checkout(repo)
    tracer = tracing.tracer()
    attributes = {tracing.CLUSTER: cluster} | ({tracing.REVISION: revision} if revision else {})
    with tracer.start_as_current_span("validate", attributes=attributes) as span:
        files, problems = _read(repo, cache=cache, revision=revision, changed=changed)
        sha = ""
        key = ""
        if store is not None and not problems:
            sha = revision or revision_id(repo, files=files, loadable=loadable)  # git: a worker thread
            digest = _digest(files, memo=cache.digests if cache is not None else None)
            key = store.key(digest=digest, cluster=cluster, revision=sha)
            stored = store.get(key)
            if stored is not None:
                span.set_attribute("fleet.cached", "disk")
                return Checked(revision=sha, plan=stored)
        if cache is not None:
            done = _incremental(
                repo, files, problems=problems, cluster=cluster, sha=sha or revision, cache=cache, store=store, key=key
            )
            for name, value in done[1].items():
                span.set_attribute(name, value)
            refused = done[0].findings if done[0].plan is None else ()
            if refused:
                span.set_status(trace.StatusCode.ERROR, f"{refused[0].location} {refused[0].rule}")
            return done[0]
        # Only now, with no plan at hand: the repository's models, the policy checks and the
        # renderer (imports a process taking a stored plan does without).
        from fleet.engine import renders
        from fleet.manifests.revisions import load_revision
        from fleet.manifests.views import resolve
        from fleet.policy import validate

        loaded = load_revision(files, findings=tuple(problems), share=len(files) > SHARED_ABOVE_FILES)
        # The checks ``fleetctl validate`` makes, satisfiability on the declared pools included:
        # what CI rejects, the controller and apply reject too.
        try:
            found = validate(loaded, clusters=[cluster]).findings
        except FleetError:
            # A tree the reader gave up on (over the file limit) may lack the Cluster itself:
            # the reader's findings say why, "no Cluster named ..." would not.
            read = tuple(f for f in problems if f.severity == "error")
            if not read:
                raise
            return Checked(revision=revision or "", plan=None, findings=read)
        findings = tuple(f for f in found if f.severity == "error")
        span.set_attribute("fleet.findings", len(findings))
        if findings:
            span.set_status(trace.StatusCode.ERROR, f"{findings[0].location} {findings[0].rule}")
    sha = sha or revision or revision_id(repo, files=files, loadable=loadable)
    if findings:
        return Checked(revision=sha, plan=None, findings=findings)
    view = resolve(loaded, cluster=cluster)
    with tracer.start_as_current_span("render", attributes={tracing.CLUSTER: cluster, tracing.REVISION: sha}):
        plan = renders.plan(view, revision=sha)
    return Checked(revision=sha, plan=plan, unstored=key if store is not None else "")


def _incremental(
    repo: Path,
    files: dict[str, bytes],
    *,
    problems: list[Finding],
    cluster: str,
    sha: str | None,
    cache: LoadCache,
    store: plancaches.PlanCache | None,
    key: str,
) -> tuple[Checked, dict[str, str | int]]:
    """``check_and_plan`` made from the last check kept in ``cache`` (``fleet.engine.increments``),
    and the ``validate`` span's attributes: ``fleet.check`` is ``full`` or ``partial``, or
    ``fleet.cached`` is ``memory`` (the same files at the same revision: the same answer)."""
    from fleet.engine import increments  # the models, the policy and the renderer: see above

    if cache.increments is None:
        cache.increments = increments.Increments()
    state: increments.Increments = cache.increments
    sha = sha or revision_id(repo, files=files, loadable=loadable)
    before = (state.full_checks, state.partial_checks)
    try:
        outcome = state.check(files, cluster=cluster, revision=sha, read=tuple(problems), cache=cache.parsed)
    except FleetError:
        read = tuple(f for f in problems if f.severity == "error")  # as in ``_check_and_plan``
        if not read:
            raise
        return Checked(revision=sha, plan=None, findings=read), {}
    finally:
        if state.full_checks > before[0]:
            cache.parsed.release()  # a partial check releases what it made itself
    attributes: dict[str, str | int] = {"fleet.findings": len(outcome.findings)}
    if state.full_checks > before[0]:
        attributes["fleet.check"] = "full"
    elif state.partial_checks > before[1]:
        attributes["fleet.check"] = "partial"
    else:
        attributes["fleet.cached"] = "memory"
    if outcome.plan is None:
        return Checked(revision=sha, plan=None, findings=outcome.findings), attributes
    return Checked(revision=sha, plan=outcome.plan, unstored=key if store is not None else ""), attributes


def store_plan(store: plancaches.PlanCache | None, checked: Checked) -> None:
    """Put ``checked``'s plan in ``store`` under ``checked.unstored`` (CPU and disk: a worker thread)."""
    plan = checked.plan
    if store is not None and checked.unstored and plan is not None:
        attributes = {tracing.CLUSTER: plan.cluster, tracing.REVISION: plan.revision}
        with tracing.tracer().start_as_current_span("store plan", attributes=attributes) as span:
            span.set_attribute("fleet.stored", store.put(checked.unstored, plan))


class InvalidRevision(FleetError):
    """The checkout does not validate for the cluster: ``findings`` are the errors that refuse it."""

    def __init__(self, what: str, *, findings: tuple[Finding, ...], where: str = "", hint: str = "") -> None:
        super().__init__(what, where=where, hint=hint)
        self.findings = findings


def require_checkout(repo: Path) -> None:
    """FleetError unless ``repo`` is a directory: said before anything else (a connection) can fail."""
    if not repo.is_dir():
        raise FleetError(f"{repo} is not a directory", hint="pass the path of a fleet repository checkout")


def load_plan(
    repo: Path, *, cluster: str, cache: LoadCache | None = None, store: plancaches.PlanCache | None = None
) -> plans.Plan:
    """Validate ``repo`` for ``cluster`` and plan it; FleetError listing the findings if invalid.

    With a ``cache`` (kept by the caller between calls), unchanged files are not read or
    parsed again and an unchanged repository is not validated or planned again; with a
    ``store``, neither is a repository another process planned (``check_and_plan``).
    """
    checked = check_and_plan(repo, cluster=cluster, cache=cache, store=store)
    if checked.plan is None:
        findings = checked.findings
        shown = "\n  ".join(f"{f.location} {f.rule} {f.message}" for f in findings[:10])
        more = f"\n  ... and {len(findings) - 10} more" if len(findings) > 10 else ""
        raise InvalidRevision(
            f"the revision does not validate; nothing was done:\n  {shown}{more}",
            findings=tuple(findings),
            where=str(repo),
            hint=f"run fleetctl validate {repo} --cluster {cluster}",
        )
    return checked.plan


SHARED_ABOVE_FILES = 5_000
"""A revision loaded only to be planned (no ``LoadCache`` keeps it) shares its models' field sets
(``load_revision``'s ``share``) above this many files: below, the memory saved (a few MiB at 2,000
objects) is not worth the walk of every model, about a quarter of loading them (issue 38)."""

OVERLAP_MAX_FILES = 5_000
"""Above this many YAML files, list live objects after planning, not during it: the
loader's peak memory and the listed objects would otherwise add up, for a saving in time
that is small beside the load."""


async def connect(
    repo: Path,
    *,
    cluster: str,
    context: str | None = None,
    kubeconfig: str | None = None,
    request_timeout: float = 30.0,
) -> kube.Client:
    """A client for ``cluster``: ``context``, else the Cluster's ``spec.context``, else the current one."""

    def named_context() -> str | None:  # file I/O: in a worker thread, off the event loop
        require_checkout(repo)  # a mistyped path is the error to show, not the kubeconfig's
        return context or cluster_context(repo, cluster=cluster)

    return await kube.connect(
        kubeconfig=kubeconfig, context=await anyio.to_thread.run_sync(named_context), timeout=request_timeout
    )


async def plan_and_list(
    repo: Path,
    *,
    cluster: str,
    client: kube.Client,
    store: plancaches.PlanCache | None = None,
    pause_collector: bool = False,
) -> tuple[plans.Plan, listings.Prefetched]:
    """Validate and plan ``repo`` (in a thread) while listing the live objects.

    ``pause_collector``: plan inside ``collector_paused`` (a process that ends after one run).
    Only the planning: each listed page's response stays in a reference cycle until a
    collection, so a listing under the pause would hold more memory.

    A writer calls this while it holds the cluster's Lease (``fleet.engine.writers``),
    so the listing it diffs against is not one another writer was changing.
    """
    count = await anyio.to_thread.run_sync(
        lambda: sum(1 for _ in itertools.islice(_yaml_files(repo), OVERLAP_MAX_FILES + 1))
    )
    overlap = count <= OVERLAP_MAX_FILES
    listing: list[listings.Prefetched] = []
    planned: list[plans.Plan] = []
    failures: list[Exception] = []

    def planning() -> plans.Plan:
        with collector_paused() if pause_collector else nullcontext():
            return load_plan(repo, cluster=cluster, store=store)

    also = listings.MAINTENANCE_READS if maintained(repo, cluster=cluster) else frozenset()

    async def fetch() -> None:
        try:
            listing.append(await listings.prefetch(client=client, also=also))
        except Exception as exc:  # raised below, not as a task group's ExceptionGroup
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        if overlap:
            tg.start_soon(fetch)
        try:
            planned.append(await anyio.to_thread.run_sync(planning))
        except Exception as exc:
            failures.insert(0, exc)  # the repository's error first: it is what the user must fix
            tg.cancel_scope.cancel()
    await anyio.lowlevel.checkpoint_if_cancelled()  # interrupted while loading: the listing never finished
    if not failures and not overlap:
        await fetch()
    if failures:
        raise failures[0]
    return planned[0], listing[0]


async def plan_and_connect(
    repo: Path,
    *,
    cluster: str,
    context: str | None = None,
    kubeconfig: str | None = None,
    request_timeout: float = 30.0,
    store: plancaches.PlanCache | None = None,
    pause_collector: bool = False,
) -> tuple[plans.Plan, kube.Client, listings.Prefetched]:
    """``connect``, then ``plan_and_list``: for readers (``diff``), which hold no Lease."""
    client = await connect(
        repo, cluster=cluster, context=context, kubeconfig=kubeconfig, request_timeout=request_timeout
    )
    try:
        plan, prefetched = await plan_and_list(
            repo, cluster=cluster, client=client, store=store, pause_collector=pause_collector
        )
    except BaseException:
        with anyio.CancelScope(shield=True):  # also when interrupted: close the session
            await client.close()
        raise
    return plan, client, prefetched


def maintained(repo: Path, *, cluster: str) -> bool:
    """The revision at ``repo`` may hold a GPUMaintenance for ``cluster``: a folder the kind must be in
    (``maintenance-location``) exists. Known before the plan, so the listing that overlaps planning
    lists what the maintenance stage reads too (a folder whose maintenances are for other clusters
    costs one listing more, not a wrong answer)."""
    return (repo / "maintenance").is_dir() or (repo / "clusters" / cluster / "maintenance").is_dir()


def _yaml_files(repo: Path) -> Iterator[str]:
    for _, _, names in os.walk(repo):
        yield from (n for n in names if n.endswith((".yaml", ".yml")))


def cluster_context(repo: Path, *, cluster: str) -> str | None:
    """``spec.context`` of ``clusters/<cluster>.yaml``: the context to use when --context is not given."""
    rel = f"clusters/{cluster}.yaml"
    try:
        content = (repo / rel).read_bytes()
    except OSError:
        return None
    # Parsed, not validated (load_plan validates the whole revision): the models are not needed
    # to read one string, and a process taking a stored plan would import them for it.
    for document in parse(file=rel, content=content, limits=Limits())[0]:
        data = document.data
        if not isinstance(data, dict) or data.get("kind") != "Cluster":
            continue
        metadata, spec = data.get("metadata"), data.get("spec")
        if data.get("apiVersion") != CLUSTER_API_VERSION or not isinstance(metadata, dict):
            continue
        if metadata.get("name") != cluster or not isinstance(spec, dict):
            continue
        context = spec.get("context")
        return context if isinstance(context, str) and context else None
    return None


def fleet_clusters(repo: Path) -> list[str]:
    """The cluster names ``fleet.yaml`` lists (``spec.clusters``), read without validating the revision.

    For commands that read every cluster's state (``fleetctl status --all``): a repository whose
    other files do not validate still names its clusters. ``FleetError`` when fleet.yaml is
    missing or lists none."""
    require_checkout(repo)
    rel = "fleet.yaml"
    try:
        content = (repo / rel).read_bytes()
    except OSError as exc:
        raise FleetError(
            f"cannot read {rel}: {exc.strerror}", where=str(repo / rel), hint="give the fleet repository's directory"
        ) from None
    for document in parse(file=rel, content=content, limits=Limits())[0]:
        data = document.data
        if not isinstance(data, dict) or data.get("kind") != "Fleet" or data.get("apiVersion") != CLUSTER_API_VERSION:
            continue
        spec = data.get("spec")
        names = spec.get("clusters") if isinstance(spec, dict) else None
        if isinstance(names, list) and names and all(isinstance(n, str) and n for n in names):
            return list(dict.fromkeys(names))
    raise FleetError(
        "fleet.yaml lists no clusters (spec.clusters)",
        where=str(repo / rel),
        hint="run fleetctl validate on the repository",
    )


CLUSTER_API_VERSION = "fleet.gpufleet.dev/v1alpha1"
"""``kinds.Cluster``'s apiVersion (a test holds the two equal)."""


__all__ = [
    "OVERLAP_MAX_FILES",
    "Checked",
    "InvalidRevision",
    "LoadCache",
    "check_and_plan",
    "cluster_context",
    "collector_paused",
    "connect",
    "fleet_clusters",
    "load_plan",
    "maintained",
    "plan_and_connect",
    "plan_and_list",
    "require_checkout",
    "store_plan",
    "tune_gc",
]
