"""``fleetctl status``: what the in-cluster controller did, read from its ``FleetSync`` objects.

The controller keeps one cluster-scoped ``FleetSync`` per cluster (``kubectl get
fleetsyncs``); this command renders it for on-call: which revision is applied and
which was attempted, the Ready/Reconciling/Stalled conditions, per-stage counts,
the validation findings (``file:line:col rule``), the drift list (each repair with the fields
it put back, their values before and after and who had changed them), the frozen objects
(``fleet.gpufleet.dev/drift``, with who froze them and when), the conflicts, the last error,
whether git is reachable, the GPU Operator release with each GPU node's driver-upgrade
state (a node stuck longer than ``driverStateTimeout`` marked with its minutes and
Events), each GPUMaintenance's phase with its devices, the pods waited on and what it waits for
(``fleet.views.maintenances``), and the trace id to look up. ``-o json`` prints the objects
as the API server returns them. Exit 0 when every FleetSync shown is Ready, 1 when
one is not (or none exists), 2 on a usage or connection error.

``--all`` is one status for the whole fleet: every cluster ``fleet.yaml`` lists (REPO,
default ``.``), each read through its own kubeconfig context (``--context-for
CLUSTER=CTX``, else the Cluster's ``spec.context``, else a context named as the cluster),
all at once, into one table: rollout wave, applied revision, Ready and its reason, drift,
conflicts, frozen objects, disruptive changes waiting, operator version, stuck nodes; below it,
what each waiting change and each held wave waits for, and each GPU maintenance's phase. A
cluster that cannot be reached, or that has no FleetSync, is a row saying so, not an error:
on-call wants the other clusters' state most when one is down. Exit 0 when every cluster is Ready, else 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

import anyio

from fleet import kube
from fleet.engine import pipelines
from fleet.errors import FleetError
from fleet.kube import timestamps
from fleet.views import maintenances
from fleet.views.fleetsyncs import API_VERSION, KIND, Row, condition, read_all, ref

STAGE_COLUMNS = ("created", "configured", "unchanged", "deleted", "skipped", "failed")


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "status",
        help="what the in-cluster controller applied, its conditions, findings and drift (FleetSync)",
        description="Render the cluster's FleetSync objects, written by fleet-controller; with --all, one table "
        "for every cluster of the fleet, each read through its own context. Exit 0 all Ready, 1 not Ready or "
        "none (or unreachable), 2 error.",
    )
    parser.add_argument("--cluster", metavar="C", help="only this cluster's FleetSync (default: every one)")
    parser.add_argument("--context", metavar="CTX", help="kubeconfig context (default: the current context)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument(
        "--all",
        action="store_true",
        help="every cluster of REPO's fleet.yaml, each through its own context, in one table",
    )
    parser.add_argument(
        "repo", nargs="?", type=Path, default=Path("."), help="with --all: the fleet repository (default: .)"
    )
    parser.add_argument(
        "--context-for",
        action="append",
        default=[],
        metavar="CLUSTER=CTX",
        help="with --all: read CLUSTER through context CTX (repeatable; default: the Cluster's spec.context, "
        "else a context named as the cluster)",
    )
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="SECONDS", help="with --all: seconds to reach each cluster"
    )
    parser.set_defaults(func=run)


async def read(*, context: str | None, kubeconfig: str | None, cluster: str | None) -> list[dict[str, Any]]:
    client = await kube.connect(kubeconfig=kubeconfig, context=context, timeout=30)
    try:
        if cluster:
            try:
                return [await client.get(ref(cluster))]
            except kube.NotFound:
                return []
        # [] when the CRD is not installed: no controller runs here
        return await client.list_if_served(api_version=API_VERSION, kind=KIND)
    finally:
        await client.close()


def operator_lines(operator: dict[str, Any], *, now: datetime.datetime) -> list[str]:
    """``status.operator``: the release line, then one line per GPU node in a driver upgrade (pure)."""
    action = operator.get("action", "")
    lines = [f"operator   {operator.get('release', '')} {operator.get('version') or '(not deployed)'}  {action}"]
    if operator.get("error"):
        lines += [f"  {line}" for line in str(operator["error"]).splitlines()]
    nodes = operator.get("driverUpgrade") or []
    width = max((len(n.get("node", "")) for n in nodes), default=0)
    for n in nodes:
        text = f"  {n.get('node', ''):<{width}}  {n.get('state', '')}"
        if n.get("stuck"):
            since = timestamps.parse(n.get("since"))
            minutes = f" for {int((now - since).total_seconds() // 60)} min" if since else ""
            limit = int(operator.get("driverStateTimeout") or 0) // 60
            text += f"  STUCK{minutes} (driverStateTimeout {limit} min)"
            events = n.get("events") or []
            text += f"; events: {' | '.join(events)}" if events else "; no recent events"
        lines.append(text)
    return lines


def maintenance_lines(status: dict[str, Any]) -> list[str]:
    """``status.maintenances``: per GPUMaintenance its phase and devices, then the pods waited on, what
    it waits for and the API server's preview (pure)."""
    found = maintenances.from_status(status.get("maintenances") or ())
    if not found:
        return []
    lines = ["", f"maintenances ({status.get('maintenanceCount', len(found))}), GPU devices out of service:"]
    for m in found:
        lines.append(f"  {m.name}  {m.phase} ({m.effect}): {m.where} ({m.reason})")
        if m.pod_count:
            pods = ", ".join(f"{p} (team {p.team})" if p.team else str(p) for p in m.pods)
            more = f" and {m.pod_count - len(m.pods)} more" if m.pod_count > len(m.pods) else ""
            lines.append(f"    pods waited on ({m.pod_count}): {pods}{more}")
        if m.waiting is not None:
            until = f", until {m.waiting.until}" if m.waiting.until else ""
            late = ", overdue" if m.waiting.overdue else ""
            lines.append(f"    waits for {m.waiting.on}: {m.waiting.reason}{until}{late}")
        if m.preview:
            lines.append(f"    the API server: {m.preview}")
    return lines


def render(obj: dict[str, Any], *, now: datetime.datetime | None = None) -> str:
    """One FleetSync as text (pure; ``now`` dates the minutes a stuck node has waited)."""
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    name = (obj.get("metadata") or {}).get("name", "?")
    ready = condition(obj, "Ready")
    lines = [
        f"cluster    {name}",
        f"source     {spec.get('repository', '')} {spec.get('ref') or '(default branch)'}"
        + (f" path {spec['path']}" if spec.get("path") else "")
        + ("" if status.get("sourceReachable", True) else f"  UNREACHABLE: {status.get('sourceError', '')}"),
        f"applied    {status.get('lastAppliedRevision') or '-'}",
        f"attempted  {status.get('lastAttemptedRevision') or '-'}",
    ]
    if status.get("enforcedRevision") and status.get("enforcedRevision") != status.get("lastAttemptedRevision"):
        lines.append(f"enforced   {status['enforcedRevision']} (the newest revision is not applied)")
    for kind in ("Ready", "Reconciling", "Stalled"):
        c = condition(obj, kind)
        if c:
            text = f"{kind:<11} {c.get('status', 'Unknown')}  {c.get('reason', '')}"
            if c.get("message") and c.get("status") == ("False" if kind == "Ready" else "True"):
                text += f": {c['message']}"
            lines.append(text)
    if not ready:
        lines.append("Ready       Unknown  (no status written yet)")
    stages = status.get("stages") or []
    if stages:
        rows = [("stage", *STAGE_COLUMNS)] + [(s["name"], *(str(s.get(k, 0)) for k in STAGE_COLUMNS)) for s in stages]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines.append("")
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if status.get("operator"):
        lines.append("")
        lines += operator_lines(status["operator"], now=now or datetime.datetime.now(datetime.UTC))
    findings = status.get("findings") or []
    if findings:
        lines.append("")
        lines.append(f"findings ({status.get('findingCount', len(findings))}), the revision was not applied:")
        lines += [f"  {f['location']} {f['rule']} {f['message']}" for f in findings]
    drift = status.get("drift") or []
    if drift:
        lines.append("")
        lines.append(f"drift ({status.get('driftCount', len(drift))}):")
        for d in drift:
            if d.get("action") == "repaired":
                by = d.get("manager") or "an unknown manager"
                lines.append(f"  {_named(d)}: repaired {d.get('time', '')}, changed by {by}")
                lines += [
                    f"    {f['field']}: {f['before']} -> {f['after']}"
                    + (f" (by {f['manager']})" if f.get("manager") and f.get("manager") != d.get("manager") else "")
                    for f in d.get("fields") or ()
                ]
                if not d.get("fields"):
                    lines.append(f"    {d.get('reason', '')}")
            else:
                lines.append(f"  {_named(d)}: {d['action']}, {d.get('reason', '')}")
    frozen = status.get("frozen") or []
    if frozen:
        lines.append("")
        lines.append(f"frozen ({status.get('frozenCount', len(frozen))}), left alone until unfrozen:")
        for f in frozen:
            if f.get("source"):
                who = f"in git at {f['source']}"
            else:
                who = f"by {f.get('by') or 'an unknown manager'}" + (f" at {f['since']}" if f.get("since") else "")
            lines.append(f"  {_named(f)}: {f.get('mode', '')}, set {who}")
    rollout = status.get("rollout") or {}
    if rollout.get("wave"):
        after = ", ".join(rollout.get("after") or ()) or "none"
        lines.append("")
        lines.append(f"wave       {rollout['wave']} (after {after}; bake {rollout.get('bake') or '-'})")
        if rollout.get("waitsFor"):
            lines.append(f"  waits for {rollout['waitsFor']} ({rollout.get('held', 0)} disruptive change(s) held)")
    held = status.get("waiting") or []
    if held:
        lines.append("")
        lines.append(f"waiting ({status.get('waitingCount', len(held))}), disruptive changes held back:")
        for w in held:
            late = ", overdue" if w.get("overdue") else ""
            lines.append(f"  {_named(w)} ({w.get('action', '')}{late}): waits for {w.get('reason', '')}")
            if w.get("disruption"):
                lines.append(f"    disruptive: {w['disruption']}")
    lines += maintenance_lines(status)
    conflicts = status.get("conflicts") or []
    if conflicts:
        lines.append("")
        lines.append(f"conflicts ({status.get('conflictCount', len(conflicts))}), not overwritten:")
        for c in conflicts:
            lines.append(f"  {_named(c)} {c['field']}: owned by {c['manager']}")
    if status.get("lastError"):
        lines.append("")
        lines.append(f"last error: {status['lastError']}")
    if status.get("traceID"):
        lines.append(f"trace      {status['traceID']}")
    return "\n".join(lines) + "\n"


def _named(row: dict[str, Any]) -> str:
    """``Kind namespace/name`` (``Kind name`` when cluster-scoped) of a status row."""
    where = f"{row['namespace']}/" if row.get("namespace") else ""
    return f"{row['kind']} {where}{row['name']}"


# -- --all: one row per cluster of the fleet --------------------------------------------------


def table(rows: list[Row]) -> str:
    """The rows as one table, then a line per cluster that is not Ready saying why (pure)."""
    head = (
        "CLUSTER",
        "CONTEXT",
        "WAVE",
        "REVISION",
        "READY",
        "REASON",
        "DRIFT",
        "CONFLICTS",
        "FROZEN",
        "WAITING",
        "OPERATOR",
        "STUCK",
    )
    lines = [head]
    for r in rows:
        if not r.reachable or r.reason == "NoFleetSync":
            lines.append((r.cluster, r.context, "-", "-", r.ready, r.reason, "-", "-", "-", "-", "-", "-"))
            continue
        lines.append(
            (
                r.cluster,
                r.context,
                str(r.wave) if r.wave else "-",
                r.revision[:12] or "-",
                r.ready,
                r.reason,
                str(r.drift),
                str(r.conflicts),
                "-" if r.frozen is None else str(r.frozen),
                str(r.waiting),
                r.operator_version or "-",
                str(r.stuck_nodes),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    notes = [f"{r.cluster}: {r.error or r.message}" for r in rows if r.ready != "True" and (r.error or r.message)]
    notes += [f"{r.cluster}: {r.waiting} disruptive change(s) wait for {r.waits_for}" for r in rows if r.waiting]
    notes += [
        f"{r.cluster}: wave {r.wave} waits for {r.wave_waits_for}"
        for r in rows
        if r.wave_waits_for and not r.waits_for.startswith(r.wave_waits_for)
    ]
    notes += [
        f"{r.cluster}: GPUMaintenance {m.name} {m.phase}: {m.where}"
        + (f", {m.pod_count} pod(s) waited on" if m.pod_count else "")
        + (f", waits for {m.waiting.reason}" if m.waiting else "")
        for r in rows
        for m in r.maintenances
    ]
    return "\n".join(out + (["", *notes] if notes else [])) + "\n"


def contexts_for(repo: Path, *, overrides: list[str]) -> list[tuple[str, str]]:
    """(cluster, context) for every cluster of ``repo``'s fleet.yaml; FleetError for a bad override."""
    clusters = pipelines.fleet_clusters(repo)
    given: dict[str, str] = {}
    for item in overrides:
        name, sep, context = item.partition("=")
        if not sep or not name or not context:
            raise FleetError(
                f"--context-for {item!r} is not CLUSTER=CTX", hint="write e.g. --context-for gpu-west=prod-west"
            )
        if name not in clusters:
            raise FleetError(
                f"--context-for names {name!r}, which fleet.yaml does not list",
                where=str(repo / "fleet.yaml"),
                hint=f"the fleet's clusters: {', '.join(clusters)}",
            )
        given[name] = context
    return [(c, given.get(c) or pipelines.cluster_context(repo, cluster=c) or c) for c in clusters]


def run_all(args: argparse.Namespace) -> int:
    if args.cluster or args.context:
        raise FleetError(
            "--all reads every cluster through its own context: it takes no --cluster or --context",
            hint="use --context-for CLUSTER=CTX to choose a cluster's context",
        )
    clusters = contexts_for(args.repo, overrides=args.context_for)
    rows = anyio.run(lambda: read_all(clusters, kubeconfig=args.kubeconfig, timeout=args.timeout))
    if args.output == "json":
        sys.stdout.write(json.dumps([r.document() for r in rows], indent=2) + "\n")
    else:
        sys.stdout.write(table(rows))
    return 0 if all(r.ready == "True" for r in rows) else 1


def run(args: argparse.Namespace) -> int:
    if args.all:
        return run_all(args)
    if args.context_for:
        raise FleetError("--context-for is for --all", hint="use --context CTX for one cluster")
    objects = anyio.run(lambda: read(context=args.context, kubeconfig=args.kubeconfig, cluster=args.cluster))
    if args.output == "json":
        sys.stdout.write(json.dumps(objects, indent=2) + "\n")
    elif not objects:
        which = f"for cluster {args.cluster} " if args.cluster else ""
        print(f"no FleetSync {which}in this cluster: is fleet-controller installed (overlays/base)?", file=sys.stderr)
    else:
        sys.stdout.write("\n".join(render(o) for o in objects))
    ok = bool(objects) and all(condition(o, "Ready").get("status") == "True" for o in objects)
    return 0 if ok else 1
