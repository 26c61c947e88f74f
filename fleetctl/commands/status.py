"""``fleetctl status``: what the in-cluster controller did, read from its ``FleetSync`` objects.

The controller keeps one cluster-scoped ``FleetSync`` per cluster (``kubectl get
fleetsyncs``); this command renders it for on-call: which revision is applied and
which was attempted, the Ready/Reconciling/Stalled conditions, per-stage counts,
the validation findings (``file:line:col rule``), the drift list (each repair with the fields
it put back, their values before and after and who had changed them), the frozen objects
(``fleet.gpufleet.dev/drift``, with who froze them and when), the conflicts, the last error,
whether git is reachable, the GPU Operator release with each GPU node's driver-upgrade
state (a node stuck longer than ``driverStateTimeout`` marked with its minutes and
Events), and the trace id to look up. ``-o json`` prints the objects
as the API server returns them. Exit 0 when every FleetSync shown is Ready, 1 when
one is not (or none exists), 2 on a usage or connection error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from typing import Any

import anyio

from fleet import kube
from fleet.controller import statuses

STAGE_COLUMNS = ("created", "configured", "unchanged", "deleted", "skipped", "failed")


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "status",
        help="what the in-cluster controller applied, its conditions, findings and drift (FleetSync)",
        description="Render the cluster's FleetSync objects, written by fleet-controller. "
        "Exit 0 all Ready, 1 not Ready or none, 2 error.",
    )
    parser.add_argument("--cluster", metavar="C", help="only this cluster's FleetSync (default: every one)")
    parser.add_argument("--context", metavar="CTX", help="kubeconfig context (default: the current context)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)


async def read(*, context: str | None, kubeconfig: str | None, cluster: str | None) -> list[dict[str, Any]]:
    client = await kube.connect(kubeconfig=kubeconfig, context=context, timeout=30)
    try:
        if cluster:
            try:
                return [await client.get(statuses.ref(cluster))]
            except kube.NotFound:
                return []
        try:
            kind = await client.kind(api_version=statuses.API_VERSION, kind=statuses.KIND)
            return (await client.list(kind)).items
        except kube.NotFound:  # the CRD is not installed: no controller runs here
            return []
    finally:
        await client.close()


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return {}


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
            since = _parse(n.get("since", ""))
            minutes = f" for {int((now - since).total_seconds() // 60)} min" if since else ""
            limit = int(operator.get("driverStateTimeout") or 0) // 60
            text += f"  STUCK{minutes} (driverStateTimeout {limit} min)"
            events = n.get("events") or []
            text += f"; events: {' | '.join(events)}" if events else "; no recent events"
        lines.append(text)
    return lines


def _parse(stamp: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


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
            where = f"{d['namespace']}/" if d.get("namespace") else ""
            if d.get("action") == "repaired":
                by = d.get("manager") or "an unknown manager"
                lines.append(f"  {d['kind']} {where}{d['name']}: repaired {d.get('time', '')}, changed by {by}")
                lines += [
                    f"    {f['field']}: {f['before']} -> {f['after']}"
                    + (f" (by {f['manager']})" if f.get("manager") and f.get("manager") != d.get("manager") else "")
                    for f in d.get("fields") or ()
                ]
                if not d.get("fields"):
                    lines.append(f"    {d.get('reason', '')}")
            else:
                lines.append(f"  {d['kind']} {where}{d['name']}: {d['action']}, {d.get('reason', '')}")
    frozen = status.get("frozen") or []
    if frozen:
        lines.append("")
        lines.append(f"frozen ({status.get('frozenCount', len(frozen))}), left alone until unfrozen:")
        for f in frozen:
            where = f"{f['namespace']}/" if f.get("namespace") else ""
            if f.get("source"):
                who = f"in git at {f['source']}"
            else:
                who = f"by {f.get('by') or 'an unknown manager'}" + (f" at {f['since']}" if f.get("since") else "")
            lines.append(f"  {f['kind']} {where}{f['name']}: {f.get('mode', '')}, set {who}")
    conflicts = status.get("conflicts") or []
    if conflicts:
        lines.append("")
        lines.append(f"conflicts ({status.get('conflictCount', len(conflicts))}), not overwritten:")
        for c in conflicts:
            where = f"{c['namespace']}/" if c.get("namespace") else ""
            lines.append(f"  {c['kind']} {where}{c['name']} {c['field']}: owned by {c['manager']}")
    if status.get("lastError"):
        lines.append("")
        lines.append(f"last error: {status['lastError']}")
    if status.get("traceID"):
        lines.append(f"trace      {status['traceID']}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
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
