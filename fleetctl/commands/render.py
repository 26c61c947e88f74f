"""``fleetctl render``: the objects fleet would apply to one cluster, in stage order, offline.

No cluster is needed: pools become per-Node applies only once nodes are listed, so
they are shown as comments (selector, labels, taints) in YAML and as ``pools`` in JSON.
The GPUOperator's chart is rendered by helm (``helm template``) against the API versions
the Cluster's ``kubernetesVersion`` serves with its default feature gates, since no cluster
is asked; the output says so. A chart that refuses to render is an error naming the
GPUOperator's file:line, and nothing is printed.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from fleet.engine import stages
from fleet.engine.pipelines import collector_paused, load_plan
from fleetctl import charts


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
    charts.add_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with collector_paused():
        plan = load_plan(args.repo, cluster=args.cluster)
    chart, rendered_with = charts.chart_objects(args, plan)
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
        if rendered_with:
            doc["operator"] = {"renderedWith": rendered_with, "items": chart}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    out = io.StringIO()
    stage = ""
    operator_at = stages.index(stages.by_name("operator"))
    for d in plan.objects:
        if rendered_with and stages.index(d.stage) > operator_at:
            _chart(out, yaml, chart, rendered_with, heading=stage != "operator")
            rendered_with, stage = "", "operator"
        if d.stage.name != stage:
            stage = d.stage.name
            out.write(f"# stage: {stage}\n")
        yaml.dump(d.obj, out)
        out.write("---\n")
    if rendered_with:
        _chart(out, yaml, chart, rendered_with, heading=stage != "operator")
    for p in pools:
        out.write(
            f"# stage: pools — GPUNodePool {p['name']} ({p['source']}): nodes matching "
            f"{json.dumps(p['nodeSelector'])} get labels {json.dumps(p['labels'])} "
            f"and taints {json.dumps(p['taints'])}\n"
        )
    sys.stdout.write(out.getvalue())
    return 0


def _chart(out: io.StringIO, yaml: YAML, objects: list[dict[str, Any]], rendered_with: str, *, heading: bool) -> None:
    if heading:
        out.write("# stage: operator\n")
    out.write(f"# {rendered_with}\n")
    for obj in objects:
        yaml.dump(obj, out)
        out.write("---\n")
