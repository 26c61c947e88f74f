"""``fleetctl apply``: apply the repository to a cluster, stage by stage, with health gates.

Only objects that differ are written (a run with nothing to do writes nothing).
Each stage must pass its health gate before the next starts; progress is printed
to stderr as stages finish (with a progress bar while a stage writes, on a
terminal), and the run ends with the per-stage summary table.
``--prune`` deletes what fleet applied earlier and the revision no longer declares.
Exit 0 all applied, 1 something failed (an object, a conflict, a health gate), 2 error.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
from rich.progress import TaskID

from fleet import engine
from fleet.telemetry import tracing
from fleetctl import reports
from fleetctl.pipelines import add_cluster_args, plan_and_connect, run_async


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "apply",
        help="apply the repository to a cluster (staged, health-gated)",
        description="Apply what differs on --cluster, stage by stage, waiting for each stage's health gate. "
        "Exit 0 applied, 1 failed, 2 error.",
    )
    add_cluster_args(parser)
    parser.add_argument("--prune", action="store_true", help="delete objects fleet applied that are no longer declared")
    parser.add_argument("--dry-run", action="store_true", help="diff every stage, write nothing")
    parser.add_argument(
        "--force-conflicts", action="store_true", help="take ownership of fields another field manager owns"
    )
    parser.add_argument("--allow-empty", action="store_true", help="allow a revision that declares no object")
    parser.add_argument(
        "--health-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long each stage's health gate may take (default 120)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_async(args, _apply)


async def _apply(args: argparse.Namespace) -> int:
    options = engine.Options(
        prune=args.prune,
        dry_run=args.dry_run,
        force_conflicts=args.force_conflicts,
        allow_empty=args.allow_empty,
        concurrency=args.concurrency,
        ignore_managers=tuple(args.ignore_manager),
        health_timeout=args.health_timeout,
    )
    failure: engine.HealthTimeout | None = None
    tracer = tracing.tracer()
    err_console = reports.console(sys.stderr)
    with tracer.start_as_current_span("apply run", attributes={tracing.CLUSTER: args.cluster}) as span:
        plan, client, prefetched = await plan_and_connect(args)
        span.set_attribute(tracing.REVISION, plan.revision)
        with reports.progress_bar(err_console) as bar:
            tasks: dict[str, TaskID] = {}

            def advance(step: str, done: int, total: int) -> None:
                if step not in tasks:
                    tasks[step] = bar.add_task(f"{step}: writing", total=total)
                bar.update(tasks[step], completed=done, total=total)

            sync = engine.Sync(client=client, plan=plan, options=options, prefetched=prefetched, progress=advance)
            try:
                await sync.start()
                while not sync.done:
                    step = sync.steps[0]
                    before = len(sync.changes.entries)
                    try:
                        await sync.step()
                    except engine.HealthTimeout as err:
                        failure = err
                        break
                    bar.console.print(_progress(step, sync.changes.entries[before:]))
            finally:
                with anyio.CancelScope(shield=True):
                    await client.close()
        span.set_attribute("fleet.writes", client.counts.writes)
    changes = sync.changes
    if args.output == "json":
        doc = changes.to_json()
        doc["requests"] = client.counts.snapshot()
        doc["error"] = str(failure) if failure else ""
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        out = reports.console(sys.stdout)
        reports.print_problems(out, changes)
        reports.print_summary(out, changes)
        if failure is not None:
            out.print(f"error: {failure}")
    # --dry-run: a conflict listed now is an object the real apply would fail on.
    return 1 if (changes.failed or failure is not None or changes.conflicted) else 0


def _progress(step: str, entries: list[engine.Change]) -> str:
    counts: dict[str, int] = {}
    for e in entries:
        counts[str(e.action)] = counts.get(str(e.action), 0) + 1
    text = ", ".join(f"{n} {a}" for a, n in sorted(counts.items())) or "nothing to do"
    return f"{step}: {text}"
