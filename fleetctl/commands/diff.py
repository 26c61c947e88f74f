"""``fleetctl diff``: what ``fleetctl apply`` would change, exactly as the API server would apply it.

Every changed object is previewed with a server-side-apply dry-run. The text lists the
changes by stage, as people read a plan: a line per object and, under a configured one, only
the fields that change (``reports.print_changes``), so a first diff of a whole fleet fits on
a screen or two; with ``--full``, or when a handful of objects change, each object's whole
unified diff, as ``kubectl diff`` prints it. Colour on a terminal, not with ``NO_COLOR``; a
summary table per stage follows. Objects fleet applied earlier that the revision no longer
declares are shown as deletions. A field another manager owns does not stop the diff: the
object's change is shown as a forced apply would make it, and the conflict is listed with
its owner and field. ``--force-conflicts`` previews exactly what ``fleetctl apply
--force-conflicts`` does. A change fleet refuses (an existing object it may not adopt, a
claim in use, a namespace others use) is listed as an error and counts as a difference: the
revision cannot be applied as it is. Exit codes follow ``kubectl diff``: 0 no differences,
1 differences, conflicts or refusals, 2 error.

``-o markdown`` writes one pull-request comment (``fleetctl.comments``) for one or more
clusters (``--cluster`` repeated, each through its Cluster's context): the stage table, each
changed object's diff in a collapsed block, the problems, the findings, and — read from the
cluster's ResourceSlices and ResourceClaims — where the claims the change adds or edits can
run and how many copies fit now, beside each team's quota before and after.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from fleet import engine
from fleet.engine.previews import unified
from fleet.errors import FleetError
from fleet.telemetry import tracing
from fleetctl import documents, reports
from fleetctl.pipelines import (
    add_base_arg,
    add_cluster_args,
    add_drift_arg,
    add_emergency_arg,
    add_impersonation_arg,
    live_devices,
    plan_and_connect,
    run_async,
    run_options,
)

if TYPE_CHECKING:
    from fleetctl import comments


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "diff",
        help="server-side dry-run diff of a cluster against the repository",
        description="Show what fleetctl apply would change on --cluster: server-side apply dry-runs compared "
        "with the live objects. Exit 0 no differences, 1 differences, 2 error (as kubectl diff).",
    )
    add_cluster_args(parser, outputs=("text", "json", "markdown"), several=True)
    parser.add_argument(
        "--force-conflicts",
        action="store_true",
        help="preview fleetctl apply --force-conflicts: take the fields other field managers own",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help=f"-o text: every changed object's whole diff (--- live / +++ merged), not only its changed fields "
        f"(always so when {reports.HANDFUL} or fewer objects change)",
    )
    add_base_arg(parser)
    add_impersonation_arg(parser)
    add_emergency_arg(parser)
    add_drift_arg(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_async(args, _diff)


async def _diff(args: argparse.Namespace) -> int:
    clusters: list[str] = list(dict.fromkeys(args.cluster))
    if len(clusters) > 1 and args.output != "markdown":
        raise FleetError("several --cluster only go with -o markdown", hint="run fleetctl diff once per cluster")
    if len(clusters) > 1 and args.context:
        raise FleetError(
            "--context names one cluster's context, and several --cluster were given",
            hint="set each Cluster's spec.context, or run fleetctl diff once per cluster",
        )
    sections = []
    codes = []
    for cluster in clusters:
        one = argparse.Namespace(**{**vars(args), "cluster": cluster})
        changes, live = await _diff_cluster(one, devices=args.output == "markdown")
        codes.append(_exit_code(changes))
        if args.output == "markdown":
            sections.append(_section(one, changes, live=live))
    if args.output == "markdown":
        from fleetctl import comments

        sys.stdout.write(comments.render(comments.DIFF_MARKER, _title(clusters, codes), sections))
    return 2 if 2 in codes else max(codes)


async def _diff_cluster(args: argparse.Namespace, *, devices: bool) -> tuple[engine.ChangeSet, _Live | None]:
    with tracing.tracer().start_as_current_span("diff run", attributes={tracing.CLUSTER: args.cluster}) as span:
        plan, client, prefetched = await plan_and_connect(args)
        span.set_attribute(tracing.REVISION, plan.revision)
        live = None
        try:
            changes = await engine.diff(
                client=client,
                plan=plan,
                prefetched=prefetched,
                options=run_options(args, client=client),
            )
            if devices:
                live = _Live(client.context, *await live_devices(client))
        finally:
            with anyio.CancelScope(shield=True):
                await client.close()
    out = sys.stdout
    if args.output == "json":
        documents.write_changes(out, changes, entry=lambda e: {"diff": unified(e) if e.action in reports.SHOWN else ""})
    elif args.output == "text":
        console = reports.console(out)
        reports.print_diff(console, changes, full=args.full)
        reports.print_problems(console, changes)
        reports.print_summary(reports.console(sys.stderr), changes)
    return changes, live


def _exit_code(changes: engine.ChangeSet) -> int:
    if any(not e.refused for e in changes.failed):
        return 2
    # A conflict or a refused change is a difference apply will not make as it is; a waiting
    # change one it will make later (in the window, once the jobs end).
    return 1 if (changes.changed or changes.conflicted or changes.failed or changes.waiting) else 0


@dataclass(frozen=True)
class _Live:
    """The diffed cluster's context, ResourceSlices and ResourceClaims (for what fits there now)."""

    context: str
    slices: list[dict[str, Any]]
    claims: list[dict[str, Any]]


def _section(args: argparse.Namespace, changes: engine.ChangeSet, *, live: _Live | None) -> comments.Section:
    """One cluster of the comment: the stage table and diffs, then findings, claims and quotas on its devices."""
    from fleet.engine import pipelines
    from fleet.inventory import Inventory, holdings
    from fleet.manifests import read_revision
    from fleet.policy import reviews, satisfiability, validate
    from fleetctl import comments

    cluster = args.cluster
    with pipelines.collector_paused():
        revision = read_revision(args.repo)
        inventories: dict[str, Inventory] = {}
        sources: dict[str, str] = {}
        held: dict[str, satisfiability.Live] = {}
        if live is not None:
            inventories[cluster] = Inventory.from_slices(live.slices)
            sources[cluster] = f"live context {live.context}"
            held[cluster] = satisfiability.Live(slices=live.slices, claims=holdings.holdings(live.claims))
        result = validate(revision, clusters=[cluster], inventories=inventories, sources=sources, live=held)
        base, ref = comments.load_base(args.repo, ref=args.base)
        review = reviews.review(revision, base=base, cluster=cluster, satisfaction=result.satisfaction)
    revision_line = f"<sub>revision {comments.code(changes.revision)}"
    revision_line += f" · context {comments.code(live.context)}</sub>\n\n" if live is not None else "</sub>\n\n"
    return comments.Section(
        f"## {comments.inline(cluster)}\n\n",
        [
            revision_line + comments.counts_part(changes),
            *comments.objects_part(changes),
            *comments.findings_part(result.findings, repo=args.repo),
            *comments.review_parts(review, repo=args.repo, base=ref),
        ],
    )


def _title(clusters: list[str], codes: list[int]) -> str:
    verdict = {0: "no changes", 1: "changes", 2: "errors"}
    states = ", ".join(f"{c}: {verdict[code]}" for c, code in zip(clusters, codes, strict=True))
    return f"**fleet diff** ({states})"
