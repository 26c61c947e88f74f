"""What the cluster commands (``diff``, ``apply``) share on the command line, and how async commands run.

The pipeline itself (checkout → validate → plan, connecting) is the library's
``fleet.engine.pipelines``, shared with the controller; this module only turns
arguments into its parameters and runs a command's async main with tracing.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar, get_args

import anyio

from fleet import engine, helm, kube
from fleet.engine import impersonations, listings, pipelines, plancaches
from fleet.engine.options import DriftPolicy
from fleet.errors import count_interrupts, unwrapped
from fleet.telemetry import tracing

T = TypeVar("T")


def add_cluster_args(
    parser: argparse.ArgumentParser, *, outputs: tuple[str, ...] = ("text", "json"), several: bool = False
) -> None:
    """Arguments ``diff`` and ``apply`` share: repository, cluster, kubeconfig, tracing.

    With ``several``, ``--cluster`` is repeatable and ``args.cluster`` a list."""
    parser.add_argument("repo", nargs="?", default=".", type=Path, help="repository checkout (default: .)")
    parser.add_argument(
        "--cluster",
        required=True,
        action="append" if several else "store",
        metavar="C",
        help="cluster name (clusters/<C>.yaml)" + ("; repeatable with -o markdown" if several else ""),
    )
    parser.add_argument(
        "--context",
        metavar="CTX",
        help="kubeconfig context (default: the Cluster's spec.context, else the current one)",
    )
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per API request (default 30)")
    parser.add_argument("--concurrency", type=int, default=16, help="parallel requests within a stage (default 16)")
    parser.add_argument(
        "--ignore-manager",
        action="append",
        default=[],
        metavar="NAME",
        help="ignore differences in fields this field manager owns (repeatable), e.g. a controller",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="where plans of unchanged repositories are kept between runs (default: $FLEET_CACHE_DIR, "
        "else $XDG_CACHE_HOME/fleet, else ~/.cache/fleet; '' turns it off)",
    )
    parser.add_argument("--trace", action="store_true", help="print the trace's spans to stderr (console exporter)")
    parser.add_argument("-o", "--output", choices=outputs, default="text")
    parser.add_argument(
        "--helm",
        metavar="PATH",
        type=Path,
        help="helm binary for the operator stage (default: $FLEET_HELM, else helm on PATH)",
    )
    parser.add_argument(
        "--helm-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="seconds one helm call may take before it is stopped (default 300); helm's own --timeout is 10%% "
        "shorter, so a failed hook is recorded by helm and never leaves the release pending",
    )


def add_base_arg(parser: argparse.ArgumentParser) -> None:
    """``--base REF`` of ``-o markdown`` (``fleet.views.comments.load_base``)."""
    parser.add_argument(
        "--base",
        metavar="REF",
        help="with -o markdown: the git revision the pull request is compared with (default: the merge-base "
        "of HEAD with origin/HEAD, origin/main or main, the first that exists; '' compares with nothing)",
    )


def add_impersonation_arg(parser: argparse.ArgumentParser) -> None:
    """``--team-impersonation`` of apply and diff (``fleet.engine.impersonations``)."""
    parser.add_argument(
        "--team-impersonation",
        choices=impersonations.MODES,
        default="optional",
        help="write (and dry-run) each team's objects as the team's ServiceAccount: required (a team "
        "without one is an error), optional (default: such a team's objects are written as you), off",
    )


def add_drift_arg(parser: argparse.ArgumentParser) -> None:
    """``--drift-policy`` of apply and diff, as the controller's (``engine.Options.drift_policy``)."""
    parser.add_argument(
        "--drift-policy",
        choices=get_args(DriftPolicy),
        default=None,
        help="the drift policy of every object the repository leaves at the default (enforce), as "
        "fleet-controller --drift-policy: report (drift is shown, not re-applied) or ignore; default: the "
        "repository's policies",
    )


def add_emergency_arg(parser: argparse.ArgumentParser) -> None:
    """``--emergency`` of apply and diff (``fleet.engine.waits``)."""
    parser.add_argument(
        "--emergency",
        metavar="WHY",
        default="",
        help="let disruptive changes skip the Cluster's maintenance window (they still wait for running GPU "
        "jobs as spec.disruption says); WHY is recorded in the trace",
    )


def helm_binary(given: Path | None) -> Path | None:
    """--helm, else $FLEET_HELM, else helm on PATH; None if none (the operator stage is then skipped).

    The sandbox's own build is not picked up by itself: ``fleetctl demo`` passes it with
    --helm, and a sandbox user can export FLEET_HELM (``fleetctl sandbox env`` paths).
    """
    if given is not None:
        return given
    env = os.environ.get("FLEET_HELM")
    if env:
        return Path(env)
    found = shutil.which("helm")
    return Path(found) if found else None


def helm_settings(args: argparse.Namespace, *, client: kube.Client) -> helm.Settings | None:
    """How the operator stage runs helm against the same cluster and context as ``client``."""
    binary = helm_binary(getattr(args, "helm", None))
    if binary is None:
        return None
    return helm.Settings(
        binary=binary, kubeconfig=args.kubeconfig, context=client.context, timeout=getattr(args, "helm_timeout", 300.0)
    )


NOT_FROM_FLAGS: dict[str, str] = {
    "reported": "the rollout waves hold the controller; a person applying by hand is not held by them",
    "handover": "only `fleetctl import` hands live objects over (fleet.engine.imports.takeovers)",
}
"""The engine options no flag of ``diff`` or ``apply`` sets, and why (``run_options`` leaves them default)."""

APPLY_ONLY = ("prune", "dry_run", "allow_empty", "health_timeout")
"""Flags only ``apply`` has, named as the options they set: ``diff`` is a dry run that shows deletions,
previews an empty plan (``engine.Options.previewed``) and waits for no health gate."""


def run_options(args: argparse.Namespace, *, client: kube.Client) -> engine.Options:
    """The run's engine options from the command's flags, made once for ``diff`` and ``apply`` alike:
    every option a flag of the command sets (``APPLY_ONLY`` where the command has them), none other
    (``NOT_FROM_FLAGS``); helm runs against ``client``'s cluster and context."""
    options = engine.Options(
        force_conflicts=args.force_conflicts,
        concurrency=args.concurrency,
        ignore_managers=tuple(args.ignore_manager),
        helm=helm_settings(args, client=client),
        impersonation=args.team_impersonation,
        emergency=args.emergency,
        drift_policy=args.drift_policy,
    )
    return dataclasses.replace(options, **{name: getattr(args, name) for name in APPLY_ONLY if hasattr(args, name)})


def plan_store(args: argparse.Namespace) -> plancaches.PlanCache | None:
    """The on-disk plan cache ``--cache-dir`` names (``fleet.engine.plancaches``); None when turned off."""
    directory = plancaches.directory(getattr(args, "cache_dir", None))
    return plancaches.PlanCache(directory) if directory is not None else None


def load_plan(args: argparse.Namespace) -> engine.Plan:
    """``fleet.engine.pipelines.load_plan`` with the command's arguments (CPU work: run it in a thread)."""
    with pipelines.collector_paused():
        return pipelines.load_plan(args.repo, cluster=args.cluster, store=plan_store(args))


async def plan_and_connect(args: argparse.Namespace) -> tuple[engine.Plan, kube.Client, listings.Prefetched]:
    """``fleet.engine.pipelines.plan_and_connect`` with the command's arguments."""
    return await pipelines.plan_and_connect(
        args.repo,
        cluster=args.cluster,
        context=args.context,
        kubeconfig=args.kubeconfig,
        request_timeout=args.timeout,
        store=plan_store(args),
        pause_collector=True,
    )


async def connect(args: argparse.Namespace) -> kube.Client:
    """``fleet.engine.pipelines.connect`` with the command's arguments."""
    return await pipelines.connect(
        args.repo, cluster=args.cluster, context=args.context, kubeconfig=args.kubeconfig, request_timeout=args.timeout
    )


def run_async(args: argparse.Namespace, main: Callable[[argparse.Namespace], Awaitable[int]]) -> int:
    """Run a command's async ``main`` with tracing (``--trace``: console) and the GC tuned.

    Ctrl-C cancels ``main`` through anyio (every ``finally`` runs, shielded clean-up
    completes) and then raises KeyboardInterrupt, which the CLI turns into exit 130.
    asyncio's own SIGINT handling cancels the task natively instead, which anyio's
    timeouts can mistake for a deadline: an interrupted connect would read "did not
    answer within 30s".
    """
    tracing.setup(exporter="console" if args.trace else None)
    pipelines.tune_gc()
    return interruptible(lambda: main(args))


def interruptible(main: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run(main)``; Ctrl-C cancels it cleanly and raises KeyboardInterrupt (see ``run_async``)."""
    try:
        return anyio.run(_interruptible, main)
    finally:
        count_interrupts()  # asyncio hands SIGINT back to Python's own handler: count it again


async def _interruptible(main: Callable[[], Awaitable[T]]) -> T:
    outcome: list[T] = []
    interrupted = anyio.Event()
    with unwrapped():  # the command's own error, as if no task group were there
        async with anyio.create_task_group() as tg:

            async def on_sigint() -> None:
                with anyio.open_signal_receiver(signal.SIGINT) as signals:
                    async for _ in signals:
                        interrupted.set()
                        tg.cancel_scope.cancel()
                        return

            async def run() -> None:
                outcome.append(await main())
                tg.cancel_scope.cancel()

            tg.start_soon(on_sigint)
            tg.start_soon(run)
    if interrupted.is_set() or not outcome:
        raise KeyboardInterrupt
    return outcome[0]


__all__ = [
    "APPLY_ONLY",
    "NOT_FROM_FLAGS",
    "add_base_arg",
    "add_cluster_args",
    "connect",
    "helm_binary",
    "helm_settings",
    "interruptible",
    "load_plan",
    "plan_and_connect",
    "plan_store",
    "run_async",
    "run_options",
]
