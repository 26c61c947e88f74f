"""What the cluster commands (``diff``, ``apply``) share on the command line.

The pipeline itself (checkout → validate → plan, connecting) is the library's
``fleet.engine.pipelines``, shared with the controller; this module only turns
arguments into its parameters and runs a command's async main with tracing.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from fleet import engine, kube
from fleet.engine import listings, pipelines
from fleet.telemetry import tracing


def add_cluster_args(parser: argparse.ArgumentParser) -> None:
    """Arguments ``diff`` and ``apply`` share: repository, cluster, kubeconfig, tracing."""
    parser.add_argument("repo", nargs="?", default=".", type=Path, help="repository checkout (default: .)")
    parser.add_argument("--cluster", required=True, metavar="C", help="cluster name (clusters/<C>.yaml)")
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
    parser.add_argument("--trace", action="store_true", help="print the trace's spans to stderr (console exporter)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


async def plan_and_connect(args: argparse.Namespace) -> tuple[engine.Plan, kube.Client, listings.Prefetched]:
    """``fleet.engine.pipelines.plan_and_connect`` with the command's arguments."""
    return await pipelines.plan_and_connect(
        args.repo, cluster=args.cluster, context=args.context, kubeconfig=args.kubeconfig, request_timeout=args.timeout
    )


def run_async(args: argparse.Namespace, main: Callable[[argparse.Namespace], Awaitable[int]]) -> int:
    """Run a command's async ``main`` with tracing (``--trace``: console) and the GC tuned."""
    tracing.setup(exporter="console" if args.trace else None)
    pipelines.tune_gc()
    return anyio.run(main, args)


__all__ = ["add_cluster_args", "plan_and_connect", "run_async"]
