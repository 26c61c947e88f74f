"""``fleetctl sandbox build|up|down|env|status``: the local control plane with simulated GPU nodes."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from fleet.sandbox import binaries, clusters, profiles


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "sandbox",
        help="local Kubernetes control plane with simulated NVIDIA GPU nodes",
        description="A real etcd, kube-apiserver, kube-scheduler, kube-controller-manager and KWOK on 127.0.0.1, "
        "with GPU nodes whose ResourceSlices look exactly like the NVIDIA DRA driver's.",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="state directory (default $FLEET_SANDBOX_DIR or ~/.local/state/fleet/sandbox)",
    )
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    build = verbs.add_parser("build", help="build the binaries for the pinned versions (cached)")
    build.add_argument("--force", action="store_true", help="rebuild even if cached")
    build.set_defaults(func=_build)

    upp = verbs.add_parser("up", help="start the sandbox (a no-op when it already runs)")
    upp.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="YAML profile of GPU pools, e.g. 'pools: {h100x8: 2, a100x8: 1}' (default: "
        + ", ".join(f"{k}: {v}" for k, v in profiles.DEFAULT.items())
        + ")",
    )
    upp.add_argument("--apiserver-port", type=int, default=None, help="fixed kube-apiserver port (default: a free one)")
    upp.set_defaults(func=_up)

    verbs.add_parser("down", help="stop every sandbox process and remove its state").set_defaults(func=_down)

    env = verbs.add_parser("env", help='print shell exports for the sandbox (eval "$(fleetctl sandbox env)")')
    env.set_defaults(func=_env)

    st = verbs.add_parser("status", help="components, ports, nodes and devices")
    st.add_argument("-o", "--output", choices=("text", "json"), default="text")
    st.set_defaults(func=_status)


def _build(args: argparse.Namespace) -> int:
    found, timings = binaries.build(force=args.force)
    if not timings:
        print("binaries up to date:", file=sys.stderr)
    for name, path in sorted(found.paths.items()):
        print(f"{name:24} {path}")
    return 0


def _up(args: argparse.Namespace) -> int:
    profile = profiles.load(args.profile)
    clusters.up(directory=args.dir, profile=profile, apiserver_port=args.apiserver_port)
    return 0


def _down(args: argparse.Namespace) -> int:
    clusters.down(directory=args.dir)
    return 0


def _env(args: argparse.Namespace) -> int:
    sb = clusters.Sandbox.load(args.dir or clusters.default_dir())
    if sb is None:
        print("no sandbox is running; start one with `fleetctl sandbox up`", file=sys.stderr)
        return 1
    print(f"export KUBECONFIG={shlex.quote(str(sb.kubeconfig))}")
    print(f"export FLEET_SANDBOX_DIR={shlex.quote(str(sb.directory))}")
    print(f"export PATH={shlex.quote(str(sb.binary('kubectl').parent))}:\"$PATH\"")
    if "helm" in sb.bin_dir:  # the operator stage's helm (fleetctl diff/apply read FLEET_HELM)
        print(f"export FLEET_HELM={shlex.quote(str(sb.binary('helm')))}")
    return 0


def _status(args: argparse.Namespace) -> int:
    st = clusters.status(directory=args.dir)
    if args.output == "json":
        print(json.dumps(st, indent=2))
        return 0 if st["up"] else 1
    if not st["up"] and "components" not in st:
        print(f"no sandbox at {st['directory']}")
        return 1
    print(f"sandbox  {'up' if st['up'] else 'DOWN'}  {st.get('server', '')}  ({st['directory']})")
    for c in st.get("components", []):
        print(f"  {c['name']:24} pid {c['pid']:<8} {'running' if c['running'] else 'STOPPED'}")
    if st["up"]:
        print(f"  nodes {st['nodes']}, devices {st['devices']}, pools {st['pools']}")
    return 0 if st["up"] else 1
