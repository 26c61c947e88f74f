"""``fleetctl preflight``: the DRA guide's prerequisite checks against a cluster, as a table.

Without a repository the checks use the guide's defaults (GPU nodes by the NFD label);
with ``REPO --cluster C`` they use that cluster's pools (their node selectors, models and
GPU counts, and its GPUOperator: the driver version the operator will install). The
separate-DRA-driver check reads Helm's release records with ``--helm`` (default: $FLEET_HELM,
else helm on PATH), as diff and apply do. Exit 0 when every check passes, 1 when one fails, 2 on a usage or
connection error. ``-o json`` prints the checks as a list.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from fleet import helm, kube
from fleet.engine import pipelines, preflights
from fleetctl.pipelines import helm_binary


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "preflight",
        help="the DRA guide's preflight checks (Kubernetes, DRA API, ClusterPolicy, GPU nodes, driver, slices)",
        description="Check a cluster against the DRA guide's prerequisites. Exit 0 all pass, 1 a check fails, 2 error.",
    )
    parser.add_argument("repo", nargs="?", type=Path, help="fleet repository (with --cluster: check its pools)")
    parser.add_argument("--cluster", metavar="C", help="cluster of the repository whose pools to check")
    parser.add_argument("--context", metavar="CTX", help="kubeconfig context (default: the current context)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument(
        "--helm",
        metavar="PATH",
        type=Path,
        help="helm binary to read release records and the chart (default: $FLEET_HELM, else helm on PATH)",
    )
    parser.set_defaults(func=run)


async def _run(args: argparse.Namespace) -> list[preflights.Check]:
    plan = None
    context = args.context
    if args.repo is not None and args.cluster:
        with pipelines.collector_paused():
            plan = await anyio.to_thread.run_sync(lambda: pipelines.load_plan(args.repo, cluster=args.cluster))
        context = context or pipelines.cluster_context(args.repo, cluster=args.cluster)
    client = await kube.connect(kubeconfig=args.kubeconfig, context=context, timeout=30)
    binary = helm_binary(args.helm)
    h = helm.Helm(helm.Settings(binary=binary, kubeconfig=args.kubeconfig, context=client.context)) if binary else None
    try:
        return await preflights.run(client=client, plan=plan, h=h)
    finally:
        await client.close()


def run(args: argparse.Namespace) -> int:
    if (args.repo is None) != (args.cluster is None):
        print("error: give both REPO and --cluster, or neither", file=sys.stderr)
        return 2
    checks = anyio.run(_run, args)
    if args.output == "json":
        sys.stdout.write(json.dumps([c.to_json() for c in checks], indent=2) + "\n")
    else:
        sys.stdout.write(preflights.table(checks))
    return 0 if all(c.ok for c in checks) else 1
