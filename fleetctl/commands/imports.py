"""``fleetctl import``: turn a cluster set up by hand into a fleet repository that diffs to zero.

Most clusters fleet meets were set up by following the DRA guide by hand: a
``helm upgrade --install`` of the GPU Operator, DeviceClasses and claim templates
applied with kubectl, nodes labelled and tainted. Writing a repository that
matches all of it exactly is the step where a missed field makes fleet's first
apply change a production cluster, so fleet writes it itself
(``fleet.engine.imports``).

The run reads the cluster, maps it, validates the files in a staging copy and only
then writes them, and ends by taking the objects over with an apply of the new
repository that changes nothing but fleet's marks and ledger (``--no-adopt`` leaves
the cluster alone; the first ``apply`` adopts then). A file ``validate`` refuses (an
object the cluster holds but fleet could never apply) is written as it is and named,
with the finding and its hint, in IMPORT.md and the summary; the take-over leaves its
object unmarked. Progress goes to stderr; the summary (or ``-o json``) to stdout. Exit 0
imported, 1 imported but files need a fix, or the take-over failed or could not start
(the files are written; the summary or the error says what), 2 error (nothing written).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

from fleet import engine, helm, kube
from fleet.engine import imports
from fleet.engine.imports import mappings, repositories
from fleet.errors import FleetError
from fleet.manifests import kinds
from fleetctl import reports
from fleetctl.pipelines import helm_binary, run_async

DEFAULT_RELEASE = str(kinds.GPUOperatorSpec.model_fields["release"].default)
DEFAULT_NAMESPACE = str(kinds.GPUOperatorSpec.model_fields["namespace"].default)


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "import",
        help="write the fleet repository of a cluster set up by hand",
        description="Read the cluster of --context and write (or add it to) the fleet repository DIR: fleet.yaml, "
        "the Cluster, GPUNodePools, the GPUOperator, DeviceClasses, Teams and their ResourceClaimTemplates, "
        "and IMPORT.md listing what could not be mapped and the files `fleetctl validate` refuses. Then fleet takes "
        "over the objects that validate, so `fleetctl diff` shows nothing. Exit 0 imported, 1 imported but files "
        "need a fix or the take-over failed, 2 error (nothing written).",
    )
    parser.add_argument("repo", type=Path, metavar="DIR", help="the repository to write (new, empty, or a fleet's)")
    parser.add_argument("--cluster", required=True, metavar="NAME", help="the Cluster's name in the fleet")
    parser.add_argument("--context", metavar="CTX", help="kubeconfig context (default: the current one)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--fleet", metavar="NAME", help="the fleet's name (default: fleet; an existing one's)")
    parser.add_argument(
        "--chart-repository",
        metavar="URL",
        default=mappings.DEFAULT_CHART_REPOSITORY,
        help="the GPU Operator chart's repository: helm's record keeps none (default: NVIDIA's, "
        f"{mappings.DEFAULT_CHART_REPOSITORY})",
    )
    parser.add_argument(
        "--release", default=DEFAULT_RELEASE, help=f"the operator's Helm release (default {DEFAULT_RELEASE})"
    )
    parser.add_argument(
        "--release-namespace", default=DEFAULT_NAMESPACE, help=f"its namespace (default {DEFAULT_NAMESPACE})"
    )
    parser.add_argument(
        "--helm", metavar="PATH", type=Path, help="helm binary (default: $FLEET_HELM, else helm on PATH)"
    )
    parser.add_argument(
        "--no-adopt",
        action="store_true",
        help="write the repository only; leave the cluster untouched (the first apply adopts)",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per API request (default 30)")
    parser.add_argument(
        "--health-timeout", type=float, default=120.0, metavar="SECONDS", help="each stage's health gate (default 120)"
    )
    parser.add_argument("--trace", action="store_true", help="print the trace's spans to stderr (console exporter)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_async(args, _import)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def _import(args: argparse.Namespace) -> int:
    root: Path = args.repo
    client = await kube.connect(kubeconfig=args.kubeconfig, context=args.context, timeout=args.timeout)
    try:
        binary = helm_binary(args.helm)
        settings = (
            helm.Settings(binary=binary, kubeconfig=args.kubeconfig, context=client.context, timeout=300.0)
            if binary is not None
            else None
        )
        _say(f"reading context {client.context}")
        live = await imports.read(
            client=client,
            h=helm.Helm(settings) if settings is not None else None,
            release=args.release,
            namespace=args.release_namespace,
        )
        if settings is None:
            live.helm_problem = "no helm binary to read the release record with (pass --helm or set FLEET_HELM)"
        found = imports.imported(
            live,
            cluster=args.cluster,
            fleet=args.fleet or "fleet",
            context=client.context,
            chart_repository=args.chart_repository,
        )

        def lay_out() -> tuple[dict[str, str], repositories.Written]:
            files = repositories.plan(root, found, cluster=args.cluster, fleet=args.fleet, context=client.context)
            return files, repositories.write(root, files, cluster=args.cluster)

        files, written = await anyio.to_thread.run_sync(lay_out)
        plan = written.plan
        refused = f", {len(written.refused)} refused by validate" if written.refused else ""
        _say(f"wrote {len(files)} files to {root} ({len(found.unmapped)} not imported{refused}: {repositories.REPORT})")
        outcome: engine.Outcome | None = None
        if not args.no_adopt:
            _say(f"taking over {len(found.handover)} objects and the pools' nodes (fleet's marks and ledger only)")
            try:
                outcome = await imports.take_over(
                    root=root,
                    cluster=args.cluster,
                    plan=plan,
                    client=client,
                    handover=found.handover,
                    options=engine.Options(helm=settings, health_timeout=args.health_timeout),
                )
            except FleetError as err:  # the Lease held by another writer, an unreachable server...
                taken = FleetError(
                    f"the repository is written, but fleet did not take the cluster over: "
                    f"{err.what.removesuffix('; nothing was written')}",
                    where=err.where,
                    hint=f"{err.hint + '; then ' if err.hint else ''}run `fleetctl apply {root} --cluster "
                    f"{args.cluster}` (it adopts; templates are then recorded as adopted, not as fleet's own)",
                )
                print(f"error: {taken}", file=sys.stderr)
                return 1
    finally:
        with anyio.CancelScope(shield=True):
            await client.close()
    failed = outcome is not None and (outcome.error is not None or outcome.changes.failed or outcome.changes.conflicted)
    _report(args, files=sorted(files), found=found, refused=written.refused, outcome=outcome)
    return 1 if failed or written.refused else 0


def _report(
    args: argparse.Namespace,
    *,
    files: list[str],
    found: imports.Imported,
    refused: tuple[repositories.Refused, ...],
    outcome: engine.Outcome | None,
) -> None:
    if args.output == "json":
        doc: dict[str, Any] = {
            "repository": str(args.repo),
            "cluster": args.cluster,
            "files": files,
            "unmapped": [{"what": u.what, "reason": u.reason} for u in found.unmapped],
            "refused": [
                {
                    "file": r.file,
                    "findings": [
                        {"location": str(f.location), "rule": f.rule, "message": f.message, "hint": f.hint}
                        for f in r.findings
                    ],
                }
                for r in refused
            ],
            "takeover": None,
        }
        if outcome is not None:
            doc["takeover"] = {
                "summary": outcome.changes.summary(),
                "error": str(outcome.error) if outcome.error is not None else "",
                "failed": [str(c.ref) for c in outcome.changes.entries if c.failed],
            }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    out = reports.console(sys.stdout)
    out.print(f"imported cluster {args.cluster} into {args.repo}: {len(files)} files")
    for u in found.unmapped:
        out.print(f"not imported: {u.what}: {u.reason}")
    if outcome is None:
        out.print("the cluster was left untouched (--no-adopt): the first `fleetctl apply` adopts")
    else:
        reports.print_problems(out, outcome.changes)
        reports.print_summary(out, outcome.changes)
        if outcome.error is not None:
            out.print(f"error: {outcome.error}")
    if refused:
        _print_refused(out, refused, root=args.repo, cluster=args.cluster)


def _print_refused(out: Console, refused: tuple[repositories.Refused, ...], *, root: Path, cluster: str) -> None:
    """Last, where it is read: which files validate refuses, why and what to do."""
    n = len(refused)
    out.print(
        f"imported; {n} file{'s' if n != 1 else ''} need{'s' if n == 1 else ''} a fix before fleet applies this "
        f"repository (their objects are left unmarked in the cluster; {repositories.REPORT} lists them):"
    )
    for r in refused:
        for f in r.findings:
            out.print(f"  {root / str(f.location)} {f.rule} {f.message}")
            if f.hint:
                out.print(f"    hint: {f.hint}")
    out.print(
        f"  then: fix or remove each file, and run `fleetctl validate {root} --cluster {cluster}` and "
        f"`fleetctl apply {root} --cluster {cluster}`"
    )


__all__ = ["register", "run"]
