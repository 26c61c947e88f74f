"""``fleetctl demo``: the whole flow on the embedded default, end to end.

Starts the sandbox (a real control plane) with the GPU nodes the chosen
cluster of the example repository expects (``examples/sandbox/<cluster>.yaml``:
16 H100, 4 A100 and 2 H200 nodes for gpu-east), then runs what a platform team runs against the example
fleet repository: validate, diff, apply, diff again (nothing left to change),
and finally schedules the guide's single-GPU pod with a team's claim template
to show the DRA path working. Each step is an ordinary ``fleetctl`` command,
printed before it runs, so the demo doubles as a tutorial.

The example fleet installs the GPU Operator from NVIDIA's chart repository, which
the sandbox cannot reach. The demo serves the stand-in chart (``fleet.sandbox.charts``)
from a Helm repository on 127.0.0.1, runs on a copy of the repository with one more
overlay (``overlays/zz-sandbox``) that points ``spec.chart.repository`` at it, and
plays the operator's controller (``fleet.sandbox.operators``) so the operator stage
installs, gates and reports like the others.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fleet.sandbox import binaries, charts, clusters, credentials, profiles
from fleet.sandbox.operators import StandInOperator
from fleetctl import cli
from fleetctl.commands import sandbox

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet"
PROFILES = EXAMPLE.parent / "sandbox"


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="sandbox + example fleet: validate, diff, apply, run a GPU pod",
        description="Run fleet end to end on the local sandbox with the example fleet repository.",
    )
    parser.add_argument("repo", nargs="?", type=Path, default=EXAMPLE, help="fleet repository (default: the example)")
    parser.add_argument("--cluster", default="gpu-east", help="which Cluster of the repository the sandbox plays")
    parser.set_defaults(func=_demo)


def _step(title: str, argv: list[str]) -> int:
    print(f"\n$ fleetctl {shlex.join(argv)}", flush=True)
    code = cli.run(argv)
    if code == 130:
        raise KeyboardInterrupt  # Ctrl-C in a step ends the demo, not just the step
    print(f"  ({title}: exit {code})", flush=True)
    return code


def sandbox_overlay(*, cluster: str, chart_repository: str) -> str:
    """The overlay that points the repository's GPUOperator at the sandbox's chart repository."""
    return (
        "# Written by fleetctl demo: install the GPU Operator from the sandbox's loopback chart repository.\n"
        + json.dumps(
            {
                "apiVersion": "fleet.gpufleet.dev/v1alpha1",
                "kind": "Overlay",
                "metadata": {"name": "zz-sandbox"},
                "spec": {
                    "clusters": {"names": [cluster]},
                    "patches": [
                        {
                            "target": {
                                "apiVersion": "fleet.gpufleet.dev/v1alpha1",
                                "kind": "GPUOperator",
                                "name": "gpu-operator",
                            },
                            "patch": {"spec": {"chart": {"repository": chart_repository}}},
                        }
                    ],
                },
            },
            indent=2,
        )
        + "\n"
    )


def _demo(args: argparse.Namespace) -> int:
    profile = PROFILES / f"{args.cluster}.yaml"
    sb = sandbox.up(directory=None, profile=profiles.load(profile if profile.exists() else None))
    helm = binaries.locate()
    if helm is None:
        print("the sandbox binaries are not built: run fleetctl sandbox build", file=sys.stderr)
        return 2
    with (
        tempfile.TemporaryDirectory(prefix="fleet-demo-") as tmp,
        charts.serve(Path(tmp) / "charts", helm=helm["helm"]) as url,
    ):
        repo = Path(tmp) / "fleet"
        shutil.copytree(args.repo, repo)
        overlay = repo / "overlays" / "zz-sandbox" / "overlay.yaml"
        overlay.parent.mkdir(parents=True, exist_ok=True)
        overlay.write_text(sandbox_overlay(cluster=args.cluster, chart_repository=url))
        print(
            f"serving the stand-in gpu-operator chart at {url}; {overlay.relative_to(repo)} points the example at it",
            flush=True,
        )
        with StandInOperator(sb):
            return _flow(args, sb, repo=str(repo), helm=str(helm["helm"]))


def _flow(args: argparse.Namespace, sb: clusters.Sandbox, *, repo: str, helm: str) -> int:
    target = ["--cluster", args.cluster, "--kubeconfig", str(sb.kubeconfig), "--context", credentials.CLUSTER]
    target += ["--helm", helm]
    if _step("validate", ["validate", repo, "--cluster", args.cluster]) != 0:
        return 1
    if _step("diff before apply: changes expected", ["diff", repo, *target]) not in (0, 1):
        return 1
    if _step("apply", ["apply", repo, *target, "--prune"]) != 0:
        return 1
    if _step("diff after apply: nothing left", ["diff", repo, *target]) != 0:
        return 1
    return _gpu_pod(sb)


def _gpu_pod(sb: clusters.Sandbox) -> int:
    """Schedule the guide's pod in a team namespace with the team's single-gpu template."""
    namespaces = json.loads(sb.kubectl("get", "resourceclaimtemplates", "-A", "-o", "json").stdout)["items"]
    owned = [t for t in namespaces if t["metadata"]["name"] == "single-gpu"]
    if not owned:
        print("no single-gpu template was applied; skipping the pod", file=sys.stderr)
        return 1
    ns = owned[0]["metadata"]["namespace"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu-pod", "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            "containers": [
                {
                    "name": "workload",
                    "image": "ubuntu:22.04",
                    "command": ["bash", "-c"],
                    "args": ["nvidia-smi -L; sleep 3600"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
    print(f"\n$ kubectl apply -n {ns} -f gpu-pod.yaml   # the guide's pod, with the team's template", flush=True)
    sb.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        p = json.loads(sb.kubectl("get", "pod", "gpu-pod", "-n", ns, "-o", "json").stdout)
        if p["status"].get("phase") == "Running":
            break
        time.sleep(0.5)
    print(sb.kubectl("get", "pod,resourceclaim", "-n", ns, "-o", "wide").stdout)
    claims = json.loads(sb.kubectl("get", "resourceclaims", "-n", ns, "-o", "json").stdout)["items"]
    for c in claims:
        for r in c.get("status", {}).get("allocation", {}).get("devices", {}).get("results", []):
            print(f"claim {c['metadata']['name']}: {r['driver']} pool {r['pool']} device {r['device']}")
    print(
        f"\nThe sandbox keeps running. Try:\n  export KUBECONFIG={sb.kubeconfig}\n"
        f"  fleetctl diff {EXAMPLE} --cluster gpu-east --context {credentials.CLUSTER}\n"
        "  fleetctl sandbox down"
    )
    return 0 if claims else 1
