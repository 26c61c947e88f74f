"""The argument parser: one sub-command per module in ``fleetctl.commands``.

Each command module exposes ``register(subparsers)`` which adds its parser and
sets ``func`` to a callable taking the parsed namespace and returning the exit
code. Exit codes follow kubectl: 0 ok, 1 findings/changes/failure, 2 usage or
internal error, 130 interrupted (SIGINT). Every user error is printed as
what/where/hint, never as a traceback: a ``FleetError``, also when an anyio task
group wrapped it in an ExceptionGroup, exits 2; Ctrl-C prints one line and exits
130 (the commands leave nothing half-written: see each command).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from fleet.builds import VersionAction
from fleet.errors import FleetError, interrupt_inside, user_errors
from fleetctl import commands

MODULES = {"import": "imports"}
"""Commands whose module has another name (``import`` is a Python keyword)."""


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser for ``argv``: only the named command's module is imported when ``argv`` names one.

    Each command's module imports what it runs (the sandbox, rich's progress bars, the
    inventory, ...); importing every one of them cost every run, ``fleetctl diff``'s among
    them, the start-up of all. With no command named (``--help``, a typo), every command is
    registered, so the usage lists them all.
    """
    parser = argparse.ArgumentParser(
        prog="fleetctl",
        description="GitOps for Kubernetes GPU fleets with Dynamic Resource Allocation.",
    )
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument(
        "--trace",
        action="store_true",
        dest="global_trace",
        help="print the run's OpenTelemetry spans to stderr (same as the command's --trace)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    names = sorted(info.name for info in pkgutil.iter_modules(commands.__path__))
    named = next((arg for arg in argv if not arg.startswith("-")), None)  # the global options take no value
    named = MODULES.get(named or "", named)
    for name in [named] if named in names else names:
        module = importlib.import_module(f"{commands.__name__}.{name}")
        module.register(sub)
    return parser


def run(argv: Sequence[str]) -> int:
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    if args.global_trace:
        args.trace = True
    try:
        return int(args.func(args))
    except FleetError as err:
        return _failed([err])
    except KeyboardInterrupt:
        return _interrupted(args)
    except BaseExceptionGroup as group:
        if group.subgroup(interrupt_inside) is not None:
            return _interrupted(args)
        errors = user_errors(group)
        if not errors or group.subgroup(lambda e: not isinstance(e, (FleetError, BaseExceptionGroup))):
            raise  # a bug: keep its traceback
        return _failed(errors)
    except Exception as exc:
        if interrupt_inside(exc):
            return _interrupted(args)
        raise  # a bug: keep its traceback


def _failed(errors: list[FleetError]) -> int:
    for err in errors:
        print(f"error: {err}", file=sys.stderr)
    return 2


def _interrupted(args: argparse.Namespace) -> int:
    print(f"fleetctl {args.command}: interrupted", file=sys.stderr)
    return 130
