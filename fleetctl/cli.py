"""The argument parser: one sub-command per module in ``fleetctl.commands``.

Each command module exposes ``register(subparsers)`` which adds its parser and
sets ``func`` to a callable taking the parsed namespace and returning the exit
code. Exit codes follow kubectl: 0 ok, 1 findings/changes/failure, 2 usage or
internal error. Any ``FleetError`` is printed as what/where/hint and exits 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from fleet.errors import FleetError
from fleetctl import commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fleetctl",
        description="GitOps for Kubernetes GPU fleets with Dynamic Resource Allocation.",
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        dest="global_trace",
        help="print the run's OpenTelemetry spans to stderr (same as the command's --trace)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub)
    return parser


def run(argv: Sequence[str]) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    if args.global_trace:
        args.trace = True
    try:
        return int(args.func(args))
    except FleetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
