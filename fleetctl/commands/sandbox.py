"""``fleetctl sandbox build|up|down|env|taint-device|gpu-health|status``: the sandbox and its GPUs.

``build`` can take half an hour on a cold cache: on a terminal it shows which step
runs and for how long (a rich progress display on stderr), elsewhere one line per
step. ``up`` interrupted with Ctrl-C stops what it had started, so no half-started
sandbox is left behind; ``build`` stages into ``.partial`` folders and only renames
a finished step, so an interrupted build leaves nothing half-written either.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import TaskID

from fleet.inventory import leftovers
from fleet.sandbox import binaries, clusters, healthevents, jaegers, profiles, releases
from fleetctl import reports


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
    kubernetes = argparse.ArgumentParser(add_help=False)
    kubernetes.add_argument(
        "--kubernetes",
        metavar="VERSION",
        default=None,
        help=f"the Kubernetes release: {', '.join(r.name for r in releases.ALL)} or its full version "
        f"(default ${releases.ENV}, else {releases.DEFAULT.version})",
    )

    build = verbs.add_parser(
        "build",
        parents=[kubernetes],
        help="build the binaries for the pinned versions (cached): the control plane, Gitea, Jaeger",
    )
    build.add_argument("--force", action="store_true", help="rebuild even if cached")
    build.add_argument(
        "--only",
        choices=("core", "extras"),
        default=None,
        help="core: what every sandbox needs (etcd, Kubernetes, KWOK, helm); extras: the git forge and the "
        "trace backend (Gitea, Jaeger). Default: both",
    )
    build.set_defaults(func=_build)

    upp = verbs.add_parser("up", parents=[kubernetes], help="start the sandbox (a no-op when it already runs)")
    upp.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="YAML profile of GPU pools and CPU pools, e.g. 'pools: {h100x8: 2, a100x8: 1}' (default: "
        + ", ".join(f"{k}: {v}" for k, v in profiles.DEFAULT.items())
        + "; CPU pools "
        + ", ".join(f"{k}: {v}" for k, v in profiles.DEFAULT_CPU.items())
        + ")",
    )
    upp.add_argument("--apiserver-port", type=int, default=None, help="fixed kube-apiserver port (default: a free one)")
    upp.add_argument(
        "--forge",
        action="store_true",
        help="also run a git forge (Gitea) on loopback; `sandbox env` prints its URL and admin token",
    )
    upp.set_defaults(func=_up)

    verbs.add_parser("down", help="stop every sandbox process and remove its state").set_defaults(func=_down)

    env = verbs.add_parser("env", help='print shell exports for the sandbox (eval "$(fleetctl sandbox env)")')
    env.set_defaults(func=_env)

    taint = verbs.add_parser(
        "taint-device",
        help="play a GPU health event: republish NODE's slice with a taint on DEVICE",
        description="Republish the ResourceSlice holding DEVICE with the device taint KEY[=VALUE]:EFFECT, as the "
        "NVIDIA driver's health checks do after an XID error (gpu.nvidia.com/xid=79:NoSchedule), a lost GPU "
        "(gpu.nvidia.com/gpu-lost:NoSchedule) or an unmonitored one (gpu.nvidia.com/unmonitored:None). "
        "KEY- removes the taint.",
    )
    taint.add_argument("node")
    taint.add_argument("device")
    taint.add_argument("taint", metavar="KEY[=VALUE]:EFFECT")
    taint.set_defaults(func=_taint_device)

    health = verbs.add_parser(
        "gpu-health",
        help="play a GPU health event as the NVIDIA driver publishes it: device taints on NODE's slices",
        description="Republish NODE's ResourceSlices as the NVIDIA DRA driver does for an NVML health event: "
        "--xid N taints DEVICE gpu.nvidia.com/xid=N (NoSchedule; None for an application XID such as 13, 31, "
        "43), --gpu-lost taints every device of the node gpu.nvidia.com/gpu-lost:NoSchedule, --unmonitored "
        "taints DEVICE's GPU gpu.nvidia.com/unmonitored:None. --clear withdraws the event's taint.",
    )
    health.add_argument("node")
    health.add_argument("device", nargs="?", help="gpu-<minor> or a MIG device (not for --gpu-lost)")
    event = health.add_mutually_exclusive_group(required=True)
    event.add_argument("--xid", type=int, metavar="N", help="an XID error (79: the GPU fell off the bus)")
    event.add_argument("--gpu-lost", action="store_true", help="NVML lost the GPU: every device of the node")
    event.add_argument("--unmonitored", action="store_true", help="NVML cannot watch DEVICE's GPU")
    health.add_argument("--clear", action="store_true", help="withdraw the event's taint (the GPU was reset)")
    health.set_defaults(func=_gpu_health)

    st = verbs.add_parser("status", help="components, ports, nodes and devices")
    st.add_argument("-o", "--output", choices=("text", "json"), default="text")
    st.set_defaults(func=_status)


def _build(args: argparse.Namespace) -> int:
    err = reports.console(sys.stderr)
    paths: dict[str, Path] = {}
    timings: dict[str, float] = {}
    with building(err) as progress:
        if args.only in (None, "core"):
            release = releases.select(args.kubernetes)
            found, built = binaries.build(release=release, force=args.force, progress=progress)
            paths |= found.paths
            timings |= built
        if args.only in (None, "extras"):
            gitea, built = binaries.build_gitea(force=args.force, progress=progress)
            timings |= built
            jaeger, built = jaegers.build(force=args.force, progress=progress)
            timings |= built
            paths |= {"gitea": gitea.binary, "jaeger": jaeger}
    if not timings:
        err.print("binaries up to date:")
    out = reports.console(sys.stdout)
    for name, path in sorted(paths.items()):
        out.print(f"{name:24} {path}")  # paths are never cut to the terminal's width
    return 0


@contextmanager
def building(out: Console) -> Iterator[Callable[[str], None]]:
    """A ``binaries.Progress`` for ``out``: a spinner per build step on a terminal, the step's lines elsewhere."""
    with reports.progress_bar(out, transient=False) as bar:
        current: list[TaskID] = []

        def progress(message: str) -> None:
            if not bar.live.is_started:
                out.print(message)
            elif message.startswith("==> "):
                if current:
                    bar.update(current[-1], total=1, completed=1)
                current.append(bar.add_task(message.removeprefix("==> "), total=None))
            elif not message.lstrip().startswith("..."):  # the bar already shows the time
                bar.console.print(message)

        yield progress
        if current:
            bar.update(current[-1], total=1, completed=1)


def _up(args: argparse.Namespace) -> int:
    profile = profiles.load(args.profile)
    release = releases.select(args.kubernetes)
    up(directory=args.dir, profile=profile, apiserver_port=args.apiserver_port, forge=args.forge, release=release)
    return 0


def up(
    *,
    directory: Path | None,
    profile: profiles.Profile,
    apiserver_port: int | None = None,
    forge: bool = False,
    release: releases.Release | None = None,
) -> clusters.Sandbox:
    """``clusters.up``, undone if interrupted (Ctrl-C): every process it started is stopped again."""
    existing = clusters.Sandbox.load(directory or clusters.default_dir())
    ran_before = existing is not None and existing.healthy()
    try:
        return clusters.up(
            directory=directory, profile=profile, apiserver_port=apiserver_port, forge=forge, release=release
        )
    except KeyboardInterrupt:
        if not ran_before:  # never stop a sandbox that was already running before this command
            clusters.down(directory=directory, progress=lambda _m: None)
        raise


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
    print(f'export PATH={shlex.quote(str(sb.binary("kubectl").parent))}:"$PATH"')
    if "helm" in sb.bin_dir:  # the operator stage's helm (fleetctl diff/apply read FLEET_HELM)
        print(f"export FLEET_HELM={shlex.quote(str(sb.binary('helm')))}")
    if sb.forge is not None:  # the forge's API and git over HTTP, as its admin
        print(f"export FLEET_FORGE_URL={shlex.quote(sb.forge.url)}")
        print(f"export FLEET_FORGE_TOKEN={shlex.quote(sb.forge.token)}")
    return 0


def _taint_device(args: argparse.Namespace) -> int:
    sb = clusters.Sandbox.load(args.dir or clusters.default_dir())
    if sb is None:
        print("no sandbox is running; start one with `fleetctl sandbox up`", file=sys.stderr)
        return 1
    device = clusters.taint_device(sb, node=args.node, device=args.device, taint=args.taint)
    taints = ", ".join(
        f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}" for t in device.get("taints") or ()
    )
    print(f"{args.node}/{args.device}: {taints or 'no taints'}")
    return 0


def _gpu_health(args: argparse.Namespace) -> int:
    sb = clusters.Sandbox.load(args.dir or clusters.default_dir())
    if sb is None:
        print("no sandbox is running; start one with `fleetctl sandbox up`", file=sys.stderr)
        return 1
    event = "xid" if args.xid is not None else "gpu-lost" if args.gpu_lost else "unmonitored"
    devices = healthevents.report(sb, node=args.node, device=args.device, event=event, xid=args.xid, clear=args.clear)
    for device in devices:
        taints = ", ".join(leftovers.taint_text(t) for t in device.get("taints") or ())
        print(f"{args.node}/{device.get('name')}: {taints or 'no taints'}")
    return 0


def _status(args: argparse.Namespace) -> int:
    st = clusters.status(directory=args.dir)
    if args.output == "json":
        print(json.dumps(st, indent=2))
        return 0 if st["up"] else 1
    if not st["up"] and "components" not in st:
        print(f"no sandbox at {st['directory']}")
        return 1
    print(
        f"sandbox  {'up' if st['up'] else 'DOWN'}  Kubernetes {st.get('kubernetes', '?')}  "
        f"{st.get('server', '')}  ({st['directory']})"
    )
    for c in st.get("components", []):
        print(f"  {c['name']:24} pid {c['pid']:<8} {'running' if c['running'] else 'STOPPED'}")
    if "feature_gates" in st:
        print(f"  feature gates            {', '.join(st['feature_gates']) or 'the defaults'}")
        print(f"  runtime-config           {', '.join(st['runtime_config']) or 'the defaults'}")
    if st.get("forge"):
        print(f"  forge (Gitea)            {st['forge']}")
    if st["up"]:
        print(
            f"  nodes {st['nodes']}, devices {st['devices']}, pools {st['pools']}, CPU pools {st.get('cpu_pools', {})}"
        )
    return 0 if st["up"] else 1
