"""``fleetctl inventory``: what GPUs a cluster publishes, and a snapshot for CI.

Reads the cluster's ResourceSlices (kubectl-style ``--kubeconfig`` /
``KUBECONFIG`` / ``--context``) and prints either a table of nodes, models and
device counts (``-o text``, for on-call) with who holds what — per allocated device
its claim and pods, per model the devices allocated, blocked, tainted and free,
the counters of partitioned GPUs (dynamic MIG) and the capacity left on shared
GPUs, the conditions drivers report for allocated devices (``status.devices``), and every
tainted device with its taint — or an inventory snapshot
(``-o yaml``/``json``) that ``fleetctl validate --inventory FILE`` checks pull
requests against without cluster access. The snapshot is read back through
the same ``Inventory.from_slices`` as live slices, so both answer alike.
Exit codes: 0 ok, 1 the cluster publishes no devices (or a pool is
incomplete), 2 usage or connection error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from fleet import kube
from fleet.inventory import Inventory, capacities, leftovers, snapshots
from fleet.views import devices
from fleet.views.slices import live_slices
from fleetctl.commands.explain import namespace_teams
from fleetctl.pipelines import interruptible


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "inventory",
        help="list a cluster's GPUs (ResourceSlices); -o yaml writes a snapshot for validate --inventory",
        description="Read the cluster's ResourceSlices. -o text: nodes, models, counts. -o yaml|json: a snapshot "
        "for `fleetctl validate --inventory FILE`. Exit 0 ok, 1 no devices or incomplete pools, 2 error.",
    )
    parser.add_argument("--context", metavar="CTX", help="kubeconfig context (default: the current context)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("-o", "--output", choices=("text", "yaml", "json"), default="text")
    parser.set_defaults(func=run)


async def read_cluster(
    *, context: str | None, kubeconfig: str | None
) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
    """(context name, ResourceSlices, ResourceClaims, namespace → team) of the cluster."""
    client = await kube.connect(kubeconfig=kubeconfig, context=context, timeout=30)
    try:
        slices = await live_slices(client)
        claims_kind = await client.kind(api_version="resource.k8s.io/v1", kind="ResourceClaim")
        claims = [dict(item) for item in (await client.list(claims_kind)).items]
        return client.context, slices, claims, await namespace_teams(client)
    finally:
        await client.close()


def allocations(
    slices: list[dict[str, Any]], claims: list[dict[str, Any]], *, teams: dict[str, str] | None = None
) -> str:
    """Who holds what: every allocated device with its uuid, claim, pods and team, then per model what is left.

    A device nobody holds may still be unusable: ``BLOCKED`` when allocated partitions of its GPU
    consume the counters it needs (dynamic MIG: memory slices, multiprocessors), ``TAINTED`` when
    a NoSchedule/NoExecute taint keeps out requests without a toleration.
    """
    seen = devices.picture(slices, claims, teams=teams or {})
    held = [("NODE", "DEVICE", "MODEL", "UUID", "CLAIM", "PODS", "TEAM")]
    for h in seen.held:
        name = h.device.rpartition("/")[2]
        held.append((h.node, name, h.model, h.uuid or "-", h.claim, ",".join(h.pods) or "-", h.team or "-"))
    lines = [_columns(held)] if len(held) > 1 else ["no device is allocated"]
    inventory, usage = seen.inventory, seen.usage
    table: list[tuple[str, ...]] = [("MODEL", "TOTAL", "ALLOCATED", "SHARED", "BLOCKED", "TAINTED", "FREE")]
    table += [
        (t.model, *(str(n) for n in (t.total, t.allocated, t.shared, t.blocked, t.tainted, t.free)))
        for t in seen.tallies
    ]
    lines += ["", _columns(table)]
    counted = leftovers.counted(inventory, usage)
    if counted:
        rows = [("NODE", "COUNTER SET", "COUNTER", "USED", "OF")]
        rows += [
            (c.node, c.counter_set, c.counter, devices.amount(c.used, c.counter), devices.amount(c.total, c.counter))
            for c in counted
        ]
        lines += ["", "partitioned GPUs: counters consumed by allocated devices", _columns(rows)]
    shared = [(i, usage.capacity[i]) for i in sorted(usage.capacity)]
    if shared:
        rows = [("NODE", "DEVICE", "CAPACITY", "USED", "OF")]
        for index, used in shared:
            item = inventory.devices[index]
            for name, capacity in sorted(item.capacities.items()):
                rows.append(
                    (item.node, item.name, name, capacities.show(used.get(name, 0)), capacities.show(capacity.value))
                )
        lines += ["", "shared GPUs: capacity consumed by allocated claims", _columns(rows)]
    reported = [d for d in seen.devices if d.conditions]
    if reported:
        status: list[tuple[str, ...]] = [("NODE", "DEVICE", "CLAIM", "CONDITIONS")]
        status += [(d.node, d.name, d.claim or "-", "; ".join(d.conditions)) for d in reported]
        lines += ["", "device status (what drivers report in their claims' status.devices)", _columns(status)]
    tainted = [d for d in inventory.devices if d.taints]
    if tainted:
        rows = [("NODE", "DEVICE", "TAINT", "", "")]
        rows += [(d.node, d.name, ", ".join(leftovers.taint_text(t) for t in d.taints), "", "") for d in tainted]
        lines += ["", "tainted devices (NoSchedule/NoExecute: only requests that tolerate the taint)", _columns(rows)]
    return "\n".join(lines)


def _columns(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def table(inventory: Inventory) -> str:
    rows = inventory.summary()
    if not rows:
        return "no devices published (no ResourceSlices, or the DRA driver is not running)"
    header = ("NODE", "DRIVER", "MODEL", "TYPE", "DEVICES")
    cells = [header, *((r["node"], r["driver"], r["model"], r["type"], str(r["count"])) for r in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells]
    models: dict[str, int] = {}
    for row in rows:
        models[row["model"]] = models.get(row["model"], 0) + row["count"]
    total = sum(models.values())
    lines.append("")
    lines.append(
        f"{total} devices on {len(inventory.nodes)} nodes: "
        + ", ".join(f"{n} x {m}" for m, n in sorted(models.items()))
    )
    lines += [f"note: {note}" for note in inventory.notes]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    context, slices, claims, teams = interruptible(
        lambda: read_cluster(context=args.context, kubeconfig=args.kubeconfig)
    )
    inventory = Inventory.from_slices(slices)
    if args.output == "text":
        print(table(inventory))
        print()
        print(allocations(slices, claims, teams=teams))
    else:
        document = snapshots.snapshot(slices=inventory.slices, cluster=context)
        text = snapshots.dump(document) if args.output == "yaml" else json.dumps(document, indent=2) + "\n"
        sys.stdout.write(text)
        for note in inventory.notes:
            print(f"note: {note}", file=sys.stderr)
    return 0 if inventory.devices and not inventory.notes else 1
