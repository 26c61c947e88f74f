"""``fleetctl render``: the objects fleet would apply to one cluster, in stage order, offline.

No cluster is needed: pools become per-Node applies only once nodes are listed, so
they are shown as comments (selector, labels, taints) in YAML and as ``pools`` in JSON.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from fleet.engine.pipelines import collector_paused, load_plan


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "render",
        help="print the desired objects of a cluster, in stage order",
        description="Validate the repository and print the objects fleet would apply to --cluster, in "
        "stage order (namespaces, operator, classes, tenancy, pools, claims). Exit 0, or 2 on error.",
    )
    parser.add_argument("repo", nargs="?", default=".", type=Path, help="repository checkout (default: .)")
    parser.add_argument("--cluster", required=True, metavar="C", help="cluster name (clusters/<C>.yaml)")
    parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with collector_paused():
        plan = load_plan(args.repo, cluster=args.cluster)
    pools = [
        {
            "name": p.name,
            "nodeSelector": p.selector,
            "labels": p.labels,
            "taints": list(p.taints),
            "nodes": p.nodes,
            "source": p.source,
        }
        for p in plan.pools
    ]
    if args.output == "json":
        doc = {
            "apiVersion": "v1",
            "kind": "List",
            "metadata": {"revision": plan.revision},
            "items": [d.obj for d in plan.objects],
            "pools": pools,
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    out = io.StringIO()
    stage = ""
    for d in plan.objects:
        if d.stage.name != stage:
            stage = d.stage.name
            out.write(f"# stage: {stage}\n")
        yaml.dump(d.obj, out)
        out.write("---\n")
    for p in pools:
        out.write(
            f"# stage: pools — GPUNodePool {p['name']} ({p['source']}): nodes matching "
            f"{json.dumps(p['nodeSelector'])} get labels {json.dumps(p['labels'])} "
            f"and taints {json.dumps(p['taints'])}\n"
        )
    sys.stdout.write(out.getvalue())
    return 0
