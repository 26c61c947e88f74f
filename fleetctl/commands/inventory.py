"""``fleetctl inventory``: what GPUs a cluster publishes, and a snapshot for CI.

Reads the cluster's ResourceSlices (kubectl-style ``--kubeconfig`` /
``KUBECONFIG`` / ``--context``) and prints either a table of nodes, models and
device counts (``-o text``, for on-call), or an inventory snapshot
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
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleet import kube
from fleet.inventory import Inventory, snapshots
from fleetctl import reports
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


async def read_slices(*, context: str | None, kubeconfig: str | None) -> tuple[str, list[dict[str, Any]]]:
    """(context name, ResourceSlices) of the cluster."""
    client = await kube.connect(kubeconfig=kubeconfig, context=context, timeout=30)
    try:
        kind = await client.kind(api_version="resource.k8s.io/v1", kind="ResourceSlice")
        return client.context, [dict(item) for item in (await client.list(kind)).items]
    finally:
        await client.close()


def print_table(out: Console, inventory: Inventory) -> None:
    """Nodes, drivers, models and device counts, then the totals per model and any notes."""
    rows = inventory.summary()
    if not rows:
        out.print("no devices published (no ResourceSlices, or the DRA driver is not running)")
        return
    table = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 2, 0, 0))
    for header in ("NODE", "DRIVER", "MODEL", "TYPE"):
        table.add_column(header)
    table.add_column("DEVICES", justify="right")
    for r in rows:
        table.add_row(r["node"], r["driver"], r["model"], r["type"], str(r["count"]))
    out.print(table)
    models: dict[str, int] = {}
    for row in rows:
        models[row["model"]] = models.get(row["model"], 0) + row["count"]
    total = sum(models.values())
    out.print()
    out.print(
        f"{total} devices on {len(inventory.nodes)} nodes: "
        + ", ".join(f"{n} x {m}" for m, n in sorted(models.items()))
    )
    for note in inventory.notes:
        out.print(Text.assemble(("note", "yellow"), f": {note}"))


def run(args: argparse.Namespace) -> int:
    context, slices = interruptible(lambda: read_slices(context=args.context, kubeconfig=args.kubeconfig))
    inventory = Inventory.from_slices(slices)
    if args.output == "text":
        print_table(reports.console(sys.stdout), inventory)
    else:
        document = snapshots.snapshot(slices=inventory.slices, cluster=context)
        text = snapshots.dump(document) if args.output == "yaml" else json.dumps(document, indent=2) + "\n"
        sys.stdout.write(text)
        for note in inventory.notes:
            print(f"note: {note}", file=sys.stderr)
    return 0 if inventory.devices and not inventory.notes else 1
