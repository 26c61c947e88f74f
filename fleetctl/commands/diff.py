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

``-o markdown`` writes one pull-request comment (``fleet.views.revisions``, which the console's
Revision page shows too) for one or more
clusters (``--cluster`` repeated, each through its Cluster's context): the stage table, each
changed object's diff in a collapsed block, the problems, the findings, and — read from the
cluster's ResourceSlices and ResourceClaims — where the claims the change adds or edits can
run and how many copies fit now, beside each team's quota before and after.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fleet import engine
from fleet.engine.previews import unified
from fleet.errors import FleetError
from fleet.views import entries, revisions
from fleetctl import documents, reports
from fleetctl.pipelines import (
    add_base_arg,
    add_cluster_args,
    add_drift_arg,
    add_emergency_arg,
    add_impersonation_arg,
    plan_store,
    run_async,
    run_options,
)


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
        codes.append(revisions.exit_code(changes))
        if args.output == "markdown":
            sections.append(
                revisions.section(
                    args.repo, cluster=cluster, changes=changes, live=live, base=args.base, pause_collector=True
                )
            )
    if args.output == "markdown":
        sys.stdout.write(revisions.comment(sections, clusters=clusters, codes=codes))
    return 2 if 2 in codes else max(codes)


async def _diff_cluster(args: argparse.Namespace, *, devices: bool) -> tuple[engine.ChangeSet, revisions.Live | None]:
    changes, live = await revisions.diff(args.repo, cluster=args.cluster, settings=settings(args), devices=devices)
    out = sys.stdout
    if args.output == "json":
        documents.write_changes(out, changes, entry=lambda e: {"diff": unified(e) if e.action in entries.SHOWN else ""})
    elif args.output == "text":
        console = reports.console(out)
        reports.print_diff(console, changes, full=args.full)
        reports.print_problems(console, changes)
        reports.print_summary(reports.console(sys.stderr), changes)
    return changes, live


def settings(args: argparse.Namespace) -> revisions.Settings:
    """How ``fleet.views.revisions`` diffs: this command's flags (``fleetctl console`` takes their defaults)."""
    return revisions.Settings(
        context=args.context,
        kubeconfig=args.kubeconfig,
        timeout=args.timeout,
        store=plan_store(args),
        base=args.base,
        options=lambda client: run_options(args, client=client),
        pause_collector=True,
    )
