"""``fleetctl console``: the fleet console on this machine, reading every context of the kubeconfig.

The whole fleet on a laptop, without a hub: each kubeconfig context (or those named with
``--context``) is a cluster of the fleet page, read with the kubeconfig's own credentials, so
Kubernetes RBAC decides what each person sees exactly as for kubectl. With a fleet repository
(``--repo``), the clusters are those ``fleet.yaml`` lists, each through its own context as
``fleetctl status --all`` reads them, and the Revision page shows what each commit of the
repository would change on each of them (``fleetctl diff -o markdown``, with its defaults).

It serves on loopback only (``--address`` to change that deliberately) and prints one URL with a
key: the first visit turns the key into the session cookie, so neither another local user nor a
web page in the browser can read the console through the port. Ctrl-C stops it (exit 130).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import getpass
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import yaml

from fleet.console import apps, logins, revisions, sources
from fleet.controller import servers
from fleet.errors import FleetError
from fleet.views.revisions import Settings
from fleetctl.commands import diff
from fleetctl.commands.status import contexts_for
from fleetctl.pipelines import interruptible


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "console",
        help="serve the fleet console (a read-only web UI) on loopback, for every kubeconfig context",
        description="Serve the fleet console on this machine: the fleet, each cluster's last run, GPUs and teams, "
        "read with your kubeconfig's credentials. Prints the URL to open. Ctrl-C stops it.",
    )
    parser.add_argument(
        "--context",
        metavar="CTX",
        action="append",
        default=[],
        help="a context to show (repeatable; default: every context of the kubeconfig)",
    )
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument(
        "--repo", type=Path, help="a fleet repository: show the clusters its fleet.yaml lists, each through its context"
    )
    parser.add_argument(
        "--context-for",
        metavar="CLUSTER=CTX",
        action="append",
        default=[],
        help="with --repo: the context of a cluster (repeatable)",
    )
    parser.add_argument("--address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765; 0: any free one)")
    parser.add_argument("--jaeger", metavar="URL", default="", help="Jaeger UI base URL: link each trace id there")
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="seconds to wait for each API server request (default 10)"
    )
    parser.set_defaults(func=run)


def kubeconfig_files(kubeconfig: str | None) -> list[Path]:
    """The kubeconfig files kubectl reads: ``--kubeconfig``, else ``$KUBECONFIG`` (a list), else ~/.kube/config."""
    if kubeconfig:
        return [Path(kubeconfig)]
    listed = [Path(p) for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return listed or [Path.home() / ".kube" / "config"]


def contexts(kubeconfig: str | None) -> tuple[list[str], str]:
    """Every context of the kubeconfig in order, and the current context's user ("" when none)."""
    names: list[str] = []
    users: dict[str, str] = {}
    current = ""
    files = kubeconfig_files(kubeconfig)
    for path in files:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except FileNotFoundError:
            continue
        except (OSError, yaml.YAMLError) as err:
            raise FleetError(f"cannot read the kubeconfig: {err}", where=str(path), hint="check the file") from err
        current = current or str(data.get("current-context") or "")
        for entry in data.get("contexts") or ():
            name = str(entry.get("name") or "")
            if name and name not in users:
                names.append(name)
                users[name] = str((entry.get("context") or {}).get("user") or "")
    if not any(p.exists() for p in files):
        raise FleetError(
            "no kubeconfig file there",
            where=", ".join(str(p) for p in files),
            hint="pass --kubeconfig FILE or set KUBECONFIG",
        )
    if not names:
        raise FleetError(
            "the kubeconfig has no context",
            where=", ".join(str(p) for p in files),
            hint="pass --kubeconfig FILE or set KUBECONFIG",
        )
    return names, users.get(current, "")


def clusters(args: argparse.Namespace) -> tuple[list[tuple[str, str]], str]:
    """(cluster, context) pairs to show, and the kubeconfig user's name."""
    known, user = contexts(args.kubeconfig)
    if args.repo is not None:
        if args.context:
            raise FleetError(
                "--repo takes each cluster's context from fleet.yaml", hint="use --context-for CLUSTER=CTX"
            )
        return contexts_for(args.repo, overrides=args.context_for), user
    if args.context_for:
        raise FleetError("--context-for goes with --repo", hint="name contexts with --context CTX")
    for name in args.context:
        if name not in known:
            raise FleetError(
                f"no context {name!r} in the kubeconfig", hint="the kubeconfig's contexts: " + ", ".join(known)
            )
    return [(c, c) for c in (args.context or known)], user


def diff_settings(args: argparse.Namespace, shown: list[tuple[str, str]]) -> Callable[[str], Settings]:
    """How the Revision page diffs on each cluster: ``fleetctl diff``'s defaults, through the cluster's context."""
    contexts = dict(shown)

    def settings(cluster: str) -> Settings:
        parser = argparse.ArgumentParser(prog="fleetctl")
        diff.register(parser.add_subparsers())
        given = ["diff", str(args.repo), "--cluster", cluster]
        given += ["--kubeconfig", args.kubeconfig] if args.kubeconfig else []
        defaults = parser.parse_args(given)
        defaults.cluster = cluster
        return dataclasses.replace(diff.settings(defaults), context=contexts.get(cluster), pause_collector=False)

    return settings


async def serve(args: argparse.Namespace) -> None:
    shown, user = clusters(args)
    source = sources.ApiSource(shown, kubeconfig=args.kubeconfig, timeout=args.timeout)
    login = logins.LocalLogin(user=user or getpass.getuser())
    commits = None
    if args.repo is not None:
        commits = revisions.CheckoutRevisions(args.repo, settings=diff_settings(args, shown))
    app, console = apps.build(source=source, login=login, jaeger=args.jaeger, revisions=commits)
    try:
        async with anyio.create_task_group() as tg:
            port = await tg.start(
                functools.partial(servers.serve, app=app, host=args.address, port=args.port, on_stop=console.stop)
            )
            host = f"[{args.address}]" if ":" in args.address else args.address
            print(f"fleet console for {len(shown)} cluster(s): {', '.join(c for c, _ in shown)}", file=sys.stderr)
            print(f"open http://{host}:{port}/?key={login.key}", flush=True)
            print("Ctrl-C stops it.", file=sys.stderr, flush=True)
    finally:
        with anyio.CancelScope(shield=True):
            await source.close()


def run(args: argparse.Namespace) -> int:
    interruptible(lambda: serve(args))
    return 0
