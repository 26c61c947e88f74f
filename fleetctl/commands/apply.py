"""``fleetctl apply``: apply the repository to a cluster, stage by stage, with health gates.

Only objects that differ are written (a run with nothing to do writes nothing but
its Lease). Each stage must pass its health gate before the next starts; progress is
printed to stderr as stages finish (with a progress bar while a stage writes, on a
terminal), and the run ends with the per-stage summary table.
``--prune`` deletes what fleet applied earlier and the revision no longer declares.

The run holds the cluster's Lease (``fleet.engine.writers``) from before it reads the
cluster until it ends: a second apply, or the controller, is refused before anything
is read or written, naming the holder; ``--wait`` queues behind it. SIGTERM, like
Ctrl-C, stops the run between requests and releases the Lease. ``--dry-run`` writes
nothing and takes no Lease.
Exit 0 all applied, 1 something failed (an object, a conflict, a health gate, the
Lease lost mid-run), 2 error (including a Lease held by another writer).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
from rich.progress import TaskID

from fleet import engine, kube
from fleet.engine import listings, operators, writers
from fleet.errors import FleetError, unwrapped
from fleet.kube import leases
from fleet.telemetry import tracing
from fleetctl import documents, reports
from fleetctl.pipelines import (
    add_cluster_args,
    add_drift_arg,
    add_emergency_arg,
    add_impersonation_arg,
    connect,
    load_plan,
    run_async,
    run_options,
)

TERMINATED = 143


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
    add_impersonation_arg(parser)
    add_emergency_arg(parser)
    add_drift_arg(parser)
    parser.add_argument(
        "--wait",
        action="store_true",
        help="when another writer (an apply, the controller) holds the cluster's Lease, queue until it is free",
    )
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
    """The run, stopped (and its Lease released) on SIGTERM as on Ctrl-C."""
    code = TERMINATED
    with unwrapped():
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_sigterm, tg.cancel_scope)
            try:
                code = await _run(args)
            finally:
                tg.cancel_scope.cancel()
    if code == TERMINATED:
        print("terminated", file=sys.stderr)
    return code


async def _stop_on_sigterm(scope: anyio.CancelScope) -> None:
    try:
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for _ in signals:
                scope.cancel()
                return
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread, or no signals here
        await anyio.sleep_forever()


@contextlib.asynccontextmanager
async def _writing(args: argparse.Namespace, client: kube.Client) -> AsyncIterator[None]:
    """The cluster's Lease for the run; none for a dry run, which writes nothing."""
    if args.dry_run:
        yield
        return

    def waiting(record: leases.Record) -> None:
        print(f"waiting: Lease of cluster {args.cluster} is held by {record.describe()}", file=sys.stderr, flush=True)

    async with writers.lock(client=client, cluster=args.cluster, wait=args.wait, on_wait=waiting):
        yield


async def _run(args: argparse.Namespace) -> int:
    failure: FleetError | None = None
    sync: engine.Sync | None = None
    tracer = tracing.tracer()
    err_console = reports.console(sys.stderr)
    with tracer.start_as_current_span("apply run", attributes={tracing.CLUSTER: args.cluster}) as span:
        client = await connect(args)
        try:
            # Validate before taking the Lease: a revision that fails validation writes nothing,
            # not even fleet's own Lease or namespace. The live listing follows the Lease, so it
            # is not one another writer was changing.
            plan = await anyio.to_thread.run_sync(lambda: load_plan(args))
            async with _writing(args, client):
                reads = listings.MAINTENANCE_READS if any(m.api_version for m in plan.maintenances) else ()
                prefetched = await listings.prefetch(client=client, also=reads)
                span.set_attribute(tracing.REVISION, plan.revision)
                options = run_options(args, client=client)
                with reports.progress_bar(err_console) as bar:
                    tasks: dict[str, TaskID] = {}

                    def advance(step: str, done: int, total: int) -> None:
                        if step not in tasks:
                            tasks[step] = bar.add_task(f"{step}: writing", total=total)
                        bar.update(tasks[step], completed=done, total=total)

                    sync = engine.Sync(
                        client=client, plan=plan, options=options, prefetched=prefetched, progress=advance
                    )

                    def stepped(step: str, entries: list[engine.Change]) -> None:
                        bar.console.print(_progress(step, entries))

                    outcome = await engine.drive(sync, hooks=engine.Hooks(after_step=stepped))
                    if isinstance(outcome.error, engine.HealthTimeout | operators.OperatorRefused):
                        failure = outcome.error  # reported with what was done
                    elif outcome.error is not None:
                        raise outcome.error
        except leases.Lost as err:
            if sync is None:
                raise
            failure = err  # writing stopped mid-run: report what was done
        finally:
            with anyio.CancelScope(shield=True):  # also when interrupted: close the session
                await client.close()
        span.set_attribute("fleet.writes", client.counts.writes)
    assert sync is not None
    changes = sync.changes
    if args.output == "json":
        documents.write_changes(
            sys.stdout, changes, requests=client.counts.snapshot(), error=str(failure) if failure else ""
        )
    else:
        out = reports.console(sys.stdout)
        refused = failure.change if isinstance(failure, operators.OperatorRefused) else None
        reports.print_problems(out, changes, omit=refused)  # the refusal is said once, where it is declared
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
