"""``fleetctl diff``: what ``fleetctl apply`` would change, exactly as the API server would apply it.

Every changed object is previewed with a server-side-apply dry-run and shown as a
unified diff (colour on a terminal, not with ``NO_COLOR``), followed by a summary
table per stage. Objects fleet applied earlier that the revision no longer declares
are shown as deletions. A field another manager owns does not stop the diff: the
object's change is shown as a forced apply would make it, and the conflict is
listed with its owner and field. ``--force-conflicts`` previews exactly what
``fleetctl apply --force-conflicts`` does. A change fleet refuses (an existing
object it may not adopt, a claim in use, a namespace others use) is listed as an
error and counts as a difference: the revision cannot be applied as it is. Exit
codes follow ``kubectl diff``: 0 no differences, 1 differences, conflicts or
refusals, 2 error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from fleet import engine
from fleet.engine.previews import unified
from fleet.telemetry import tracing
from fleetctl import documents, reports
from fleetctl.pipelines import add_cluster_args, helm_settings, plan_and_connect, run_async


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "diff",
        help="server-side dry-run diff of a cluster against the repository",
        description="Show what fleetctl apply would change on --cluster: server-side apply dry-runs compared "
        "with the live objects. Exit 0 no differences, 1 differences, 2 error (as kubectl diff).",
    )
    add_cluster_args(parser)
    parser.add_argument(
        "--force-conflicts",
        action="store_true",
        help="preview fleetctl apply --force-conflicts: take the fields other field managers own",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_async(args, _diff)


async def _diff(args: argparse.Namespace) -> int:
    with tracing.tracer().start_as_current_span("diff run", attributes={tracing.CLUSTER: args.cluster}) as span:
        plan, client, prefetched = await plan_and_connect(args)
        span.set_attribute(tracing.REVISION, plan.revision)
        try:
            changes = await engine.diff(
                client=client,
                plan=plan,
                prefetched=prefetched,
                options=engine.Options(
                    concurrency=args.concurrency,
                    ignore_managers=tuple(args.ignore_manager),
                    force_conflicts=args.force_conflicts,
                    helm=helm_settings(args, client=client),
                ),
            )
        finally:
            with anyio.CancelScope(shield=True):
                await client.close()
    out = sys.stdout
    if args.output == "json":
        documents.write_changes(out, changes, entry=lambda e: {"diff": unified(e) if e.action in reports.SHOWN else ""})
    else:
        console = reports.console(out)
        reports.print_diff(console, changes)
        reports.print_problems(console, changes)
        reports.print_summary(reports.console(sys.stderr), changes)
    if any(not e.refused for e in changes.failed):
        return 2
    # A conflict or a refused change is a difference apply will not make as it is.
    return 1 if (changes.changed or changes.conflicted or changes.failed) else 0
