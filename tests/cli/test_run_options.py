"""``fleetctl diff`` and ``apply`` make the run's engine options once, from their flags, alike.

Every engine option is set from a flag or named in ``pipelines.NOT_FROM_FLAGS`` with why not;
``diff`` honours each flag it shares with ``apply`` exactly as ``apply`` does. Pure: the flags are
parsed by fleetctl's own parser, and nothing talks to a cluster.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import cast

from fleet import engine, kube
from fleetctl import cli, pipelines

SHARED = [
    "--force-conflicts",
    "--concurrency",
    "3",
    "--ignore-manager",
    "kubectl-edit",
    "--helm",
    "/usr/bin/helm",
    "--team-impersonation",
    "off",
    "--emergency",
    "the driver leaks memory",
    "--drift-policy",
    "report",
]
APPLY = ["--prune", "--dry-run", "--allow-empty", "--health-timeout", "7"]


def run_options(argv: list[str]) -> engine.Options:
    args = cli.build_parser(argv).parse_args(argv)
    client = cast(kube.Client, SimpleNamespace(context="ctx"))  # helm_settings reads only its context
    return pipelines.run_options(args, client=client)


def left_default(options: engine.Options) -> set[str]:
    default = engine.Options()
    return {f.name for f in dataclasses.fields(options) if getattr(options, f.name) == getattr(default, f.name)}


def test_every_option_is_set_from_apply_s_flags_or_said_not_to_be() -> None:
    options = run_options(["apply", "repo", "--cluster", "c", *SHARED, *APPLY])
    assert left_default(options) == set(pipelines.NOT_FROM_FLAGS)
    assert options.impersonation == "off" and options.helm is not None and options.helm.context == "ctx"


def test_diff_honours_the_flags_it_shares_with_apply_as_apply_does() -> None:
    applied = run_options(["apply", "repo", "--cluster", "c", *SHARED, *APPLY])
    diffed = run_options(["diff", "repo", "--cluster", "c", *SHARED])
    assert left_default(diffed) == set(pipelines.NOT_FROM_FLAGS) | set(pipelines.APPLY_ONLY)
    default = engine.Options()
    assert diffed == dataclasses.replace(applied, **{n: getattr(default, n) for n in pipelines.APPLY_ONLY})
    # What engine.diff previews: apply --dry-run --prune --allow-empty with the same flags.
    assert diffed.previewed() == dataclasses.replace(applied, health_timeout=default.health_timeout)
