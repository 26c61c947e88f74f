"""``fleetctl diff``: what ``fleetctl apply`` would change, exactly as the API server would apply it.

Every changed object is previewed with a server-side-apply dry-run and shown as a
unified diff (colour on a terminal, not with ``NO_COLOR``), followed by a summary
table per stage. Objects fleet applied earlier that the revision no longer declares
are shown as deletions. Exit codes follow ``kubectl diff``: 0 no differences,
1 differences, 2 error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from fleet import engine, kube
from fleet.engine import diffs
from fleet.engine.diffs import unified
from fleet.telemetry import tracing
from fleetctl import reports
from fleetctl.pipelines import load_plan, tune_gc


def add_cluster_args(parser: argparse.ArgumentParser) -> None:
    """Arguments ``diff`` and ``apply`` share: repository, cluster, kubeconfig, tracing."""
    parser.add_argument("repo", nargs="?", default=".", type=Path, help="repository checkout (default: .)")
    parser.add_argument("--cluster", required=True, metavar="C", help="cluster name (clusters/<C>.yaml)")
    parser.add_argument("--context", metavar="CTX",
                        help="kubeconfig context (default: the Cluster's spec.context, else the current one)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per API request (default 30)")
    parser.add_argument("--concurrency", type=int, default=16, help="parallel requests within a stage (default 16)")
    parser.add_argument("--trace", action="store_true", help="print the trace's spans to stderr (console exporter)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "diff", help="server-side dry-run diff of a cluster against the repository",
        description="Show what fleetctl apply would change on --cluster: server-side apply dry-runs compared "
                    "with the live objects. Exit 0 no differences, 1 differences, 2 error (as kubectl diff).")
    add_cluster_args(parser)
    parser.set_defaults(func=run)


def context_for(plan_cluster_context: str | None, args: argparse.Namespace) -> str | None:
    return args.context or plan_cluster_context


async def plan_and_connect(args: argparse.Namespace) -> tuple[engine.Plan, kube.Client, diffs.Prefetched]:
    """Validate and plan the repository (in a thread) while connecting and listing live objects."""
    client = await kube.connect(kubeconfig=args.kubeconfig, context=args.context, timeout=args.timeout)
    try:
        async with anyio.create_task_group() as tg:
            listing: list[diffs.Prefetched] = []

            async def fetch() -> None:
                listing.append(await diffs.prefetch(client=client))

            tg.start_soon(fetch)
            plan = await anyio.to_thread.run_sync(lambda: load_plan(args.repo, cluster=args.cluster))
    except BaseException:
        await client.close()
        raise
    return plan, client, listing[0]


def run(args: argparse.Namespace) -> int:
    tracing.setup(exporter="console" if args.trace else None)
    tune_gc()
    return anyio.run(_diff, args)


async def _diff(args: argparse.Namespace) -> int:
    with tracing.tracer().start_as_current_span("diff run", attributes={tracing.CLUSTER: args.cluster}) as span:
        plan, client, prefetched = await plan_and_connect(args)
        span.set_attribute(tracing.REVISION, plan.revision)
        try:
            changes = await engine.diff(client=client, plan=plan, prefetched=prefetched,
                                        options=engine.Options(concurrency=args.concurrency))
        finally:
            await client.close()
    out = sys.stdout
    if args.output == "json":
        doc = changes.to_json()
        for item, entry in zip(doc["entries"], changes.entries, strict=True):
            item["diff"] = unified(entry) if entry.action in (engine.Action.CREATED, engine.Action.CONFIGURED,
                                                              engine.Action.DELETED) else ""
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        use_colour = reports.colour(out)
        out.write(reports.diff_text(changes, use_colour=use_colour))
        out.write(reports.problems(changes, use_colour=use_colour))
        sys.stderr.write(reports.summary_table(changes))
    if changes.failed:
        return 2
    return 1 if changes.changed else 0
