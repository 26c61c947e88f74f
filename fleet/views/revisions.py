"""What a revision of the fleet repository changes on a cluster, as ``fleetctl diff -o markdown`` says it.

``fleetctl diff -o markdown`` and the console's Revision page both call these functions, so a
page shows the comment a pull request gets, byte for byte: ``diff`` plans the checkout and
dry-runs it against the cluster (with the cluster's ResourceSlices and ResourceClaims, for
what fits there now); ``section`` lays out one cluster of the comment (the stage table, each
changed object's diff, the findings, the claims and quotas against the base); ``comment`` puts
the clusters under one title within GitHub's size limit (``fleet.views.comments``).

A checkout that does not validate for a cluster is no diff: ``fleetctl diff`` stops with the
error, and ``markdown`` (the console's entry, which shows every cluster whatever one says)
makes that cluster's section from the validation findings instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from fleet import engine, kube
from fleet.engine import pipelines, plancaches
from fleet.telemetry import tracing

if TYPE_CHECKING:  # imported where used: a diff from a stored plan loads neither models nor checks
    from fleet.manifests import Finding
    from fleet.policy import satisfiability
    from fleet.views import comments

VERDICTS = {0: "no changes", 1: "changes", 2: "errors"}
"""A cluster's exit code (``exit_code``) as the comment's title says it."""


def _default_options(client: kube.Client) -> engine.Options:
    return engine.Options()


@dataclass(frozen=True)
class Settings:
    """How a checkout is diffed against a cluster: what ``fleetctl diff``'s flags set.

    ``options`` makes the engine's options once the cluster's client exists (helm runs against
    its context); ``base`` is the commit the claims and quotas are compared with (None: the
    merge-base ``comments.load_base`` finds, "": none); ``pause_collector`` is for a process that
    ends after one run (fleetctl), never for a server. ``client``: a connected client to diff
    with, which the caller keeps open (fleet-controller's own); None connects through ``context``
    and ``kubeconfig`` and closes after.
    """

    context: str | None = None
    kubeconfig: str | None = None
    timeout: float = 30.0
    store: plancaches.PlanCache | None = None
    base: str | None = None
    options: Callable[[kube.Client], engine.Options] = field(default=_default_options)
    pause_collector: bool = False
    client: kube.Client | None = None


@dataclass(frozen=True)
class Live:
    """The diffed cluster's context, ResourceSlices and ResourceClaims (for what fits there now)."""

    context: str
    slices: list[dict[str, Any]]
    claims: list[dict[str, Any]]


async def live_devices(client: kube.Client) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The cluster's ResourceSlices (with the DeviceTaintRules' taints: ``slices.live_slices``) and (for what
    fits now) the ResourceClaims of every namespace."""
    from fleet.views.slices import live_slices

    claims = await client.kind(api_version="resource.k8s.io/v1", kind="ResourceClaim")
    return await live_slices(client), list((await client.list(claims)).items)


async def diff(repo: Path, *, cluster: str, settings: Settings, devices: bool) -> tuple[engine.ChangeSet, Live | None]:
    """The ChangeSet ``fleetctl apply`` would make of ``repo`` on ``cluster``; with ``devices``, the live devices.

    Raises ``pipelines.InvalidRevision`` when the checkout does not validate for the cluster."""
    with tracing.tracer().start_as_current_span("diff run", attributes={tracing.CLUSTER: cluster}) as span:
        if settings.client is not None:
            client = settings.client
            plan, prefetched = await pipelines.plan_and_list(
                repo, cluster=cluster, client=client, store=settings.store, pause_collector=settings.pause_collector
            )
        else:
            plan, client, prefetched = await pipelines.plan_and_connect(
                repo,
                cluster=cluster,
                context=settings.context,
                kubeconfig=settings.kubeconfig,
                request_timeout=settings.timeout,
                store=settings.store,
                pause_collector=settings.pause_collector,
            )
        span.set_attribute(tracing.REVISION, plan.revision)
        live = None
        try:
            changes = await engine.diff(
                client=client, plan=plan, prefetched=prefetched, options=settings.options(client)
            )
            if devices:
                live = Live(client.context, *await live_devices(client))
        finally:
            if settings.client is None:
                with anyio.CancelScope(shield=True):
                    await client.close()
    return changes, live


def exit_code(changes: engine.ChangeSet) -> int:
    """``fleetctl diff``'s exit code for one cluster: 0 no differences, 1 differences, 2 errors."""
    if any(not e.refused for e in changes.failed):
        return 2
    # A conflict or a refused change is a difference apply will not make as it is; a waiting
    # change one it will make later (in the window, once the jobs end).
    return 1 if (changes.changed or changes.conflicted or changes.failed or changes.waiting) else 0


def section(
    repo: Path,
    *,
    cluster: str,
    changes: engine.ChangeSet,
    live: Live | None,
    base: str | None,
    pause_collector: bool = False,
) -> comments.Section:
    """One cluster of the comment: the stage table and diffs, then findings, claims and quotas on its devices.

    Reads and validates ``repo`` (CPU work: a server runs it in a worker thread)."""
    from fleet.inventory import Inventory, holdings
    from fleet.manifests import read_revision
    from fleet.policy import reviews, satisfiability, validate
    from fleet.views import comments

    with pipelines.collector_paused() if pause_collector else nullcontext():
        revision = read_revision(repo)
        inventories: dict[str, Inventory] = {}
        sources: dict[str, str] = {}
        held: dict[str, satisfiability.Live] = {}
        if live is not None:
            inventories[cluster] = Inventory.from_slices(live.slices)
            sources[cluster] = f"live context {live.context}"
            held[cluster] = satisfiability.Live(slices=live.slices, claims=holdings.holdings(live.claims))
        result = validate(revision, clusters=[cluster], inventories=inventories, sources=sources, live=held)
        base_revision, ref = comments.load_base(repo, ref=base)
        review = reviews.review(revision, base=base_revision, cluster=cluster, satisfaction=result.satisfaction)
    revision_line = f"<sub>revision {comments.code(changes.revision)}"
    revision_line += f" · context {comments.code(live.context)}</sub>\n\n" if live is not None else "</sub>\n\n"
    return comments.Section(
        f"## {comments.inline(cluster)}\n\n",
        [
            revision_line + comments.counts_part(changes),
            *comments.objects_part(changes),
            *comments.findings_part(result.findings, repo=repo),
            *comments.review_parts(review, repo=repo, base=ref),
        ],
    )


def invalid_section(repo: Path, *, cluster: str, findings: Sequence[Finding]) -> comments.Section:
    """One cluster whose checkout does not validate: nothing would be applied, and the findings say why."""
    from fleet.views import comments

    return comments.Section(
        f"## {comments.inline(cluster)}\n\n",
        [
            "The revision does not validate for this cluster: nothing would be applied.\n\n",
            *comments.findings_part(findings, repo=repo),
        ],
    )


def title(clusters: Sequence[str], codes: Sequence[int]) -> str:
    states = ", ".join(f"{c}: {VERDICTS[code]}" for c, code in zip(clusters, codes, strict=True))
    return f"**fleet diff** ({states})"


def comment(sections: Sequence[comments.Section], *, clusters: Sequence[str], codes: Sequence[int]) -> str:
    """The pull-request comment of ``fleetctl diff -o markdown``: marker, title, each cluster's section."""
    from fleet.views import comments

    return comments.render(comments.DIFF_MARKER, title(clusters, codes), sections)


async def markdown(repo: Path, *, cluster: str, settings: Settings) -> str:
    """``fleetctl diff -o markdown --cluster CLUSTER`` of the checkout ``repo``; findings when it does not validate.

    Any other error (the cluster does not answer, the kubeconfig has no such context) is raised."""
    try:
        changes, live = await diff(repo, cluster=cluster, settings=settings, devices=True)
    except pipelines.InvalidRevision as err:
        found = invalid_section(repo, cluster=cluster, findings=err.findings)
        return comment([found], clusters=[cluster], codes=[2])
    one = await anyio.to_thread.run_sync(
        lambda: section(repo, cluster=cluster, changes=changes, live=live, base=settings.base)
    )
    return comment([one], clusters=[cluster], codes=[exit_code(changes)])


__all__ = [
    "VERDICTS",
    "Live",
    "Settings",
    "comment",
    "diff",
    "exit_code",
    "invalid_section",
    "live_devices",
    "markdown",
    "section",
    "title",
]
