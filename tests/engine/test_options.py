"""The run's options reach the engine whole: ``engine.diff`` previews under every option it is given.

``engine.Options`` is made once at each front door and derived after with ``dataclasses.replace``;
a copy made field by field drops what it forgets (``fleetctl diff --team-impersonation`` was
previewed as ``optional`` so). Pure: the driver is stood in for, and nothing talks to a server.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from fleet import engine, helm
from fleet.engine import ledgers, waits
from fleet.kube import Client

EVERY_OPTION: dict[str, Any] = {
    "prune": False,
    "dry_run": False,
    "force_conflicts": True,
    "allow_empty": False,
    "concurrency": 3,
    "health_timeout": 7.0,
    "ignore_managers": ("kubectl-edit",),
    "helm": helm.Settings(binary=Path("/usr/bin/helm"), context="ctx"),
    "impersonation": "off",
    "emergency": "the driver leaks memory",
    "reported": waits.Reported(revision="abc"),
    "drift_policy": "report",
    "handover": {"/Node/n1": cast(ledgers.Origin, "adopted")},
}
"""A value for every option; the preview's own ones (``prune``, ``dry_run``, ``allow_empty``) as a run's."""


class Driven(Exception):
    """Raised by the stand-in driver with the options of the run it was given."""

    def __init__(self, options: engine.Options) -> None:
        self.options = options


def test_every_option_has_a_value_here() -> None:
    assert set(EVERY_OPTION) == {f.name for f in dataclasses.fields(engine.Options)}


def test_diff_previews_under_every_option_given(monkeypatch: pytest.MonkeyPatch) -> None:
    def drive(sync: engine.Sync, **_: Any) -> engine.Outcome:
        raise Driven(sync.options)

    monkeypatch.setattr(engine, "drive", drive)
    given = engine.Options(**EVERY_OPTION)
    plan = engine.Plan(cluster="gpu-east", revision="abc", objects=())
    with pytest.raises(Driven) as driven:
        anyio.run(lambda: engine.diff(client=cast(Client, object()), plan=plan, options=given))
    previewed = driven.value.options
    assert previewed == dataclasses.replace(given, prune=True, dry_run=True, allow_empty=True)
    assert previewed == given.previewed()
