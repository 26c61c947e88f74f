"""``fleetctl validate``: every check a pull request must pass, as CI reads it.

Loads the checkout (``fleet.manifests``), runs the policy per cluster
(``fleet.policy``) with the DRA CEL compiler, and prints the findings as
``file:line:col rule-id message`` plus a ``hint:`` line (colour only on a
terminal without ``NO_COLOR``), as JSON, or as GitHub workflow annotations.
Exit codes: 0 no errors (warnings allowed), 1 errors found, 2 usage or
internal error — an internal error must never look like "your change is bad".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from fleet.errors import FleetError
from fleet.manifests import Finding, Revision, read_revision
from fleet.policy import check

_RED, _YELLOW, _DIM, _BOLD, _RESET = "\033[31m", "\033[33m", "\033[2m", "\033[1m", "\033[0m"


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "validate",
        help="check a fleet repository (schema, policy, CEL, inventory)",
        description="Check a fleet repository checkout: YAML, schemas, policy, CEL selectors and, with "
        "--inventory or --context, whether each template can be satisfied. "
        "Exit 0 clean, 1 findings, 2 usage or internal error.",
    )
    parser.add_argument("repo", nargs="?", default=".", type=Path, help="repository checkout (default: .)")
    parser.add_argument(
        "--cluster",
        action="append",
        default=[],
        metavar="C",
        help="check only this cluster (repeatable; default: every cluster)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--inventory",
        type=Path,
        metavar="FILE",
        help="inventory snapshot (fleetctl inventory -o yaml) to check satisfiability against",
    )
    source.add_argument("--context", metavar="CTX", help="kubeconfig context whose ResourceSlices to check against")
    parser.add_argument("-o", "--output", choices=("text", "json", "github"), default="text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return _validate(args)
    except FleetError:
        raise
    except Exception:  # an internal error must not read as "findings" (exit 1)
        traceback.print_exc()
        print("error: internal error in fleetctl validate (exit 2); please report it", file=sys.stderr)
        return 2


def _validate(args: argparse.Namespace) -> int:
    repo: Path = args.repo
    if not repo.is_dir():
        raise FleetError(f"{repo} is not a directory", hint="pass the path of a fleet repository checkout")
    if args.inventory is not None or args.context is not None:
        raise FleetError(
            "inventory satisfiability is not available yet (fleet.inventory has not landed)",
            hint="run without --inventory/--context for now",
        )
    revision = read_revision(repo)
    findings = check(revision, clusters=args.cluster)
    out = sys.stdout
    if args.output == "json":
        out.write(to_json(findings, repo=repo, revision=revision) + "\n")
    elif args.output == "github":
        out.writelines(f"{line}\n" for line in to_github(findings, repo=repo))
    else:
        out.write(to_text(findings, repo=repo, revision=revision, colour=_colour(out)))
    return 1 if any(f.severity == "error" for f in findings) else 0


def _colour(out: TextIO) -> bool:
    return out.isatty() and "NO_COLOR" not in os.environ


def display_path(repo: Path, file: str) -> str:
    """The finding's file as seen from the working directory (as CI shows it)."""
    return os.path.normpath(repo / file) if file else os.path.normpath(repo)


def to_text(findings: Sequence[Finding], *, repo: Path, revision: Revision, colour: bool) -> str:
    lines = []
    for f in findings:
        where = f.location
        position = f":{where.line}:{where.col}" if where.line else ""
        rule = f.rule
        if colour:
            rule = f"{_RED if f.severity == 'error' else _YELLOW}{_BOLD}{rule}{_RESET}"
        level = "" if f.severity == "error" else "warning: "
        cluster = f" [cluster {f.cluster}]" if f.cluster else ""
        lines.append(f"{display_path(repo, where.file)}{position} {rule} {level}{f.message}{cluster}")
        if f.hint:
            hint = f"  hint: {f.hint}"
            lines.append(f"{_DIM}{hint}{_RESET}" if colour else hint)
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    files = len({m.file for m in revision.manifests})
    lines.append(f"{errors} error(s), {warnings} warning(s) in {len(revision.manifests)} objects, {files} files")
    return "\n".join(lines) + "\n"


def to_json(findings: Sequence[Finding], *, repo: Path, revision: Revision) -> str:
    items = [
        {
            "file": display_path(repo, f.location.file),
            "line": f.location.line,
            "col": f.location.col,
            "rule": f.rule,
            "severity": f.severity,
            "message": f.message,
            "hint": f.hint,
            "object": f.object,
            "cluster": f.cluster,
        }
        for f in findings
    ]
    errors = sum(f.severity == "error" for f in findings)
    summary = {"errors": errors, "warnings": len(findings) - errors, "objects": len(revision.manifests)}
    return json.dumps({"findings": items, "summary": summary}, indent=2)


def to_github(findings: Sequence[Finding], *, repo: Path) -> list[str]:
    """GitHub workflow commands (``::error file=...,line=...,col=...::message``)."""
    lines = []
    for f in findings:
        props = [f"file={_prop(display_path(repo, f.location.file))}"]
        if f.location.line:
            props += [f"line={f.location.line}", f"col={f.location.col}"]
        props.append(f"title={_prop(f.rule)}")
        text = f"{f.message} [cluster {f.cluster}]" if f.cluster else f.message
        if f.hint:
            text += f"\nhint: {f.hint}"
        lines.append(f"::{f.severity} {','.join(props)}::{_data(text)}")
    return lines


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
