"""``fleetctl validate``: every check a pull request must pass, as CI reads it.

Loads the checkout (``fleet.manifests``), runs the policy per cluster
(``fleet.policy``) with the DRA CEL compiler and — given an inventory snapshot
(``--inventory``) or a live cluster (``--context``) — satisfiability of every
claim on that cluster's devices (``fleet.inventory``), and prints the findings as
``file:line:col rule-id message`` plus a ``hint:`` line (through rich: colour
only on a terminal without ``NO_COLOR``) followed by the satisfiability table, as JSON,
or as GitHub workflow annotations.
Exit codes: 0 no errors (warnings allowed), 1 errors found, 2 usage or
internal error — an internal error must never look like "your change is bad".
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

from fleet import kube
from fleet.engine import pipelines, probes
from fleet.errors import FleetError, interrupt_inside
from fleet.inventory import Inventory, holdings, snapshots
from fleet.manifests import (
    Finding,
    Limits,
    Location,
    Manifest,
    Revision,
    cluster_names,
    fixes,
    kinds,
    read_revision,
    read_tree,
)
from fleet.policy import Result, Satisfaction, declarations, reviews, validate
from fleet.policy.satisfiability import Live
from fleet.views import comments
from fleet.views.revisions import live_devices
from fleetctl import charts, reports
from fleetctl.pipelines import add_base_arg, interruptible


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "validate",
        help="check a fleet repository (schema, policy, CEL, inventory)",
        description="Check a fleet repository checkout: YAML, schemas, policy, CEL selectors and, with "
        "--inventory or --context, whether each template can be satisfied. "
        "Exit 0 clean, 1 findings, 2 usage or internal error.",
    )
    parser.add_argument("repo", nargs="?", default=".", type=Path, help="repository checkout (default: .)")
    parser.add_argument(
        "--cluster",
        action="append",
        default=[],
        metavar="C",
        help="check only this cluster (repeatable; default: every cluster)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--inventory",
        type=Path,
        metavar="FILE",
        help="inventory snapshot (fleetctl inventory -o yaml) to check satisfiability against",
    )
    source.add_argument("--context", metavar="CTX", help="kubeconfig context whose ResourceSlices to check against")
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig for --context (default: $KUBECONFIG, ~/.kube/config)"
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "json", "github", "markdown"),
        default="text",
        help="markdown: one pull-request comment (findings, the claims the change adds or changes, quotas)",
    )
    add_base_arg(parser)
    parser.add_argument(
        "--fix",
        action="store_true",
        help="first rewrite what has one right answer (deprecated resource.k8s.io versions to v1, renamed NVIDIA "
        "attributes, YAML 1.1 ambiguities), keeping comments and layout; prints each change",
    )
    parser.add_argument("--diff", action="store_true", help="with --fix: print the changes as a diff, write nothing")
    parser.add_argument(
        "--charts",
        action="store_true",
        help="also render each cluster's GPUOperator chart with helm, against the API versions its "
        "kubernetesVersion serves by default (a refusal is a chart-render finding)",
    )
    charts.add_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return _validate(args)
    except FleetError:
        raise
    except Exception as exc:  # an internal error must not read as "findings" (exit 1)
        if interrupt_inside(exc):
            raise KeyboardInterrupt from exc
        traceback.print_exc()
        print("error: internal error in fleetctl validate (exit 2); please report it", file=sys.stderr)
        return 2


def _validate(args: argparse.Namespace) -> int:
    pipelines.tune_gc()  # a revision is tens of thousands of long-lived objects
    repo: Path = args.repo
    pipelines.require_checkout(repo)
    if args.diff and not args.fix:
        raise FleetError("--diff only goes with --fix", hint="run fleetctl validate --fix --diff")
    if args.fix:
        fix_files(repo, diff=args.diff, out=sys.stderr if args.output != "text" else sys.stdout)
    with pipelines.collector_paused():
        revision = read_revision(repo)
        inventories, sources, live = _inventories(args, revision=revision)
        features = _features(args, revision=revision, clusters=list(inventories))
        result = validate(
            revision, clusters=args.cluster, inventories=inventories, sources=sources, live=live, features=features
        )
    if args.inventory is not None:
        result = dataclasses.replace(result, findings=sorted({*result.findings, *_snapshot_findings(args.inventory)}))
    if args.charts and not any(f.severity == "error" for f in result.findings):
        found, notes = charts.chart_findings(args, revision, clusters=list(args.cluster))
        result.findings.extend(found)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    findings = result.findings
    out = sys.stdout
    if args.output == "json":
        out.write(to_json(result, repo=repo, revision=revision) + "\n")
    elif args.output == "github":
        out.writelines(f"{line}\n" for line in to_github(findings, repo=repo))
    elif args.output == "markdown":
        out.write(to_markdown(result, repo=repo, revision=revision, clusters=args.cluster, base=args.base))
    else:
        console = reports.console(out)
        print_text(console, findings, repo=repo, revision=revision)
        # the per-claim table for an explicit snapshot or context; declared pools only speak through findings
        explicit = [s for s in result.satisfaction if s.source != declarations.SOURCE]
        console.print(satisfaction_text(explicit, repo=repo), end="")
    return 1 if any(f.severity == "error" for f in findings) else 0


def _snapshot_findings(path: Path) -> list[Finding]:
    """Slices of the snapshot that the API server or the scheduler would refuse, at their line."""
    return [
        Finding(
            Location(str(path), line, column),
            problem.rule,
            problem.message,
            hint=problem.hint,
            object=f"ResourceSlice #{problem.slice}",
        )
        for line, column, problem in snapshots.problems(path.read_text(encoding="utf-8"))
    ]


def _inventories(
    args: argparse.Namespace, *, revision: Revision
) -> tuple[dict[str, Inventory], dict[str, str], dict[str, Live]]:
    """``{cluster: Inventory}``, ``{cluster: source}`` and (``--context``) ``{cluster: Live}``.

    Empty without --inventory/--context: then each cluster is checked against its declared GPUNodePools.
    """
    live: Live | None = None
    known = cluster_names(revision)
    chosen = args.cluster[0] if len(args.cluster) == 1 else ""
    if args.inventory is not None:
        path: Path = args.inventory
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise FleetError(
                f"cannot read inventory {path}: {err}", hint="write one with fleetctl inventory -o yaml"
            ) from err
        inventory, recorded = snapshots.load(text, where=str(path))
        cluster = chosen or recorded or (known[0] if len(known) == 1 else "")
        source, label = f"inventory {path}", f"snapshot {path}"
    elif args.context is not None:
        nodes = bool(revision.of_kind("GPUMaintenance"))
        slices, claims, labels = interruptible(lambda: _live_objects(args.context, args.kubeconfig, nodes=nodes))
        inventory = Inventory.from_slices(slices)
        live = Live(slices=slices, claims=holdings.holdings(claims), nodes=labels)
        by_context = [m.name for m in revision.of_kind("Cluster") if _context_of(m) == args.context]
        cluster = (
            chosen or (by_context[0] if len(by_context) == 1 else "") or (args.context if args.context in known else "")
        )
        source, label = f"context {args.context}", f"live context {args.context}"
    else:
        return {}, {}, {}
    if cluster not in known:
        raise FleetError(
            f"which cluster is the {source} for? " + (f"{cluster!r} is not a Cluster" if cluster else "not recorded"),
            hint=f"pass --cluster (known clusters: {', '.join(known) or 'none'})",
        )
    return {cluster: inventory}, {cluster: label}, ({cluster: live} if live is not None else {})


def fix_files(repo: Path, *, diff: bool, out: TextIO) -> int:
    """Apply :func:`fleet.manifests.fixes.fix_text` to every YAML file of ``repo``; the number of changes."""
    files, _ = read_tree(repo, limits=Limits())
    count = 0
    for name, content in sorted(files.items()):
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError:
            continue  # validate reports it (yaml-encoding)
        fixed, changes = fixes.fix_text(text)
        if not changes:
            continue
        count += len(changes)
        shown = display_path(repo, name)
        if diff:
            out.writelines(difflib.unified_diff(text.splitlines(True), fixed.splitlines(True), shown, shown))
        else:
            (repo / name).write_text(fixed, encoding="utf-8")
        out.writelines(f"{shown}:{c.line} {'would fix' if diff else 'fixed'}: {c.what}\n" for c in changes)
    return count


def _context_of(cluster: Manifest) -> str | None:
    return cluster.model.spec.context if isinstance(cluster.model, kinds.Cluster) else None


def _features(args: argparse.Namespace, *, revision: Revision, clusters: list[str]) -> dict[str, probes.Features]:
    """With ``--context``: the cluster's Kubernetes minor and DRA feature gates as its dry runs show them,
    in place of what its Cluster declares (``fleet.engine.probes``)."""
    if args.context is None or not clusters:
        return {}
    declared = probes.declared(revision, cluster=clusters[0])
    if declared is None:
        return {}
    seen = interruptible(lambda: probes.observe_context(args.context, args.kubeconfig, declared=declared))
    return {clusters[0]: seen}


async def _live_objects(
    context: str, kubeconfig: str | None, *, nodes: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, str]] | None]:
    """The ResourceSlices, (for what fits now) the ResourceClaims of every namespace and, with ``nodes`` (the
    GPUMaintenances' pools), each node's labels: None where they are not read or the credential may not list them."""
    client = await kube.connect(kubeconfig=kubeconfig, context=context, timeout=30)
    try:
        slices, claims = await live_devices(client)
        labels = None
        if nodes:
            try:
                listed = await client.list_if_served(api_version="v1", kind="Node")
            except kube.Forbidden:
                listed = None
            if listed is not None:
                labels = {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in listed}
        return slices, claims, labels
    finally:
        await client.close()


def display_path(repo: Path, file: str) -> str:
    """The finding's file as seen from the working directory (as CI shows it)."""
    return os.path.normpath(repo / file) if file else os.path.normpath(repo)


def print_text(out: Console, findings: Sequence[Finding], *, repo: Path, revision: Revision) -> None:
    """``file:line:col rule message`` per finding, its hint below, then the count (rule ids in colour)."""
    for f in findings:
        where = f.location
        position = f":{where.line}:{where.col}" if where.line else ""
        level = "" if f.severity == "error" else "warning: "
        cluster = f" [cluster {f.cluster}]" if f.cluster else ""
        out.print(
            Text.assemble(
                f"{display_path(repo, where.file)}{position} ",
                (f.rule, "bold red" if f.severity == "error" else "bold yellow"),
                f" {level}{f.message}{cluster}",
            )
        )
        if f.hint:
            out.print(Text(f"  hint: {f.hint}", style="dim"))
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    files = len({m.file for m in revision.manifests})
    out.print(f"{errors} error(s), {warnings} warning(s) in {len(revision.manifests)} objects, {files} files")


def satisfaction_text(satisfaction: Sequence[Satisfaction], *, repo: Path) -> str:
    """One line per claim and cluster: on how many nodes, with how many devices, how many at once."""
    lines = []
    for s in sorted(satisfaction, key=lambda s: (s.cluster, s.location)):
        verdict = "UNSATISFIABLE" if s.nodes == 0 else f"{s.nodes} node(s), {s.devices} device(s), {s.capacity} at once"
        if s.now is not None and s.nodes:
            verdict += f", {s.now} now"
        undecided = f" ({s.undecided_nodes} node(s) undecided)" if s.undecided_nodes else ""
        source = f" [{s.source}]" if s.source else ""
        lines.append(f"  {s.cluster}: {s.object} ({display_path(repo, s.location.file)}): {verdict}{undecided}{source}")
    return "satisfiability:\n" + "\n".join(lines) + "\n" if lines else ""


def to_json(result: Result, *, repo: Path, revision: Revision) -> str:
    findings = result.findings
    items = [
        {
            "file": display_path(repo, f.location.file),
            "line": f.location.line,
            "col": f.location.col,
            "rule": f.rule,
            "severity": f.severity,
            "message": f.message,
            "hint": f.hint,
            "object": f.object,
            "cluster": f.cluster,
        }
        for f in findings
    ]
    errors = sum(f.severity == "error" for f in findings)
    summary = {"errors": errors, "warnings": len(findings) - errors, "objects": len(revision.manifests)}
    satisfaction = [
        {
            "cluster": s.cluster,
            "object": s.object,
            "file": display_path(repo, s.location.file),
            "line": s.location.line,
            "nodes": s.nodes,
            "devices": s.devices,
            "capacity": s.capacity,
            "undecidedNodes": s.undecided_nodes,
            "source": s.source,
            "now": s.now,
        }
        for s in result.satisfaction
    ]
    return json.dumps({"findings": items, "satisfaction": satisfaction, "summary": summary}, indent=2)


def to_markdown(result: Result, *, repo: Path, revision: Revision, clusters: Sequence[str], base: str | None) -> str:
    """The pull-request comment: per cluster its findings, the claims the change adds or changes, quotas.

    A finding for every cluster (no ``cluster``) is listed under each; one without a cluster at all
    (a file that does not load) under a ``Repository`` heading when there are no clusters.
    """
    base_revision, base_ref = comments.load_base(repo, ref=base)
    names = list(clusters) or cluster_names(revision)
    sections = []
    for name in names:
        mine = [f for f in result.findings if not f.cluster or name in f.cluster.split(",")]
        try:
            review = reviews.review(revision, base=base_revision, cluster=name, satisfaction=result.satisfaction)
        except FleetError:  # the cluster's own file does not load: its findings say why
            review = None
        sections.append(
            comments.Section(
                f"## {comments.inline(name)}\n\n",
                [*comments.findings_part(mine, repo=repo), *comments.review_parts(review, repo=repo, base=base_ref)],
            )
        )
    if not names:
        sections.append(comments.Section("## Repository\n\n", comments.findings_part(result.findings, repo=repo)))
    errors = sum(f.severity == "error" for f in result.findings)
    verdict = "❌ does not validate" if errors else "✅ validates"
    title = (
        f"**fleet validate** {verdict}: {errors} error(s), {len(result.findings) - errors} warning(s) in "
        f"{len(revision.manifests)} objects, {len(names)} cluster(s)"
    )
    return comments.render(comments.VALIDATE_MARKER, title, sections)


def to_github(findings: Sequence[Finding], *, repo: Path) -> list[str]:
    """GitHub workflow commands (``::error file=...,line=...,col=...::message``)."""
    lines = []
    for f in findings:
        props = [f"file={_prop(display_path(repo, f.location.file))}"]
        if f.location.line:
            props += [f"line={f.location.line}", f"col={f.location.col}"]
        props.append(f"title={_prop(f.rule)}")
        text = f"{f.message} [cluster {f.cluster}]" if f.cluster else f.message
        if f.hint:
            text += f"\nhint: {f.hint}"
        lines.append(f"::{f.severity} {','.join(props)}::{_data(text)}")
    return lines


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
