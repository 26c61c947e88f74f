"""diffs.Settled: the no-dry-run answer is remembered per live version and desired content."""

from __future__ import annotations

import copy
from typing import Any

from fleet.engine import diffs, ownership, stages
from fleet.engine.plans import Desired


def _pair() -> tuple[Desired, dict[str, Any]]:
    obj = ownership.fingerprinted(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"team": "a"}}}
    )
    live = copy.deepcopy(obj)
    live["metadata"].update(
        uid="u",
        resourceVersion="7",
        managedFields=[
            {
                "manager": "fleet",
                "operation": "Apply",
                "fieldsV1": {
                    "f:metadata": {"f:annotations": {f"f:{ownership.APPLIED}": {}}, "f:labels": {"f:team": {}}}
                },
            }
        ],
    )
    return Desired(body=obj, stage=stages.by_name("namespaces"), source="x.yaml:1:1"), live


def test_an_answer_is_reused_for_the_same_live_version_only() -> None:
    d, live = _pair()
    settled = diffs.Settled()
    assert settled.unchanged(d, live)
    # Same uid and resourceVersion: the API server guarantees the same content, so the answer
    # stands without looking (here the copy is tampered with to show it is not looked at).
    tampered = copy.deepcopy(live)
    tampered["metadata"]["managedFields"] = []
    assert settled.unchanged(d, tampered)
    tampered["metadata"]["resourceVersion"] = "8"
    assert not settled.unchanged(d, tampered), "a new version is judged again"


def test_sweep_keeps_only_what_the_last_run_asked() -> None:
    d, live = _pair()
    settled = diffs.Settled()
    settled.unchanged(d, live)
    settled.sweep()
    assert len(settled.answers) == 1
    settled.sweep()
    assert len(settled) == 0


def test_versions_past_the_limit_evict_the_oldest_answers() -> None:
    d, live = _pair()
    settled = diffs.Settled(limit=3)
    for version in range(10):  # a heartbeat per run, and no sweep: the limit alone holds
        live["metadata"]["resourceVersion"] = str(version)
        settled.unchanged(d, live)
    assert len(settled) == 3
    assert settled.answers.evicted == 7
    settled.sweep()
    assert len(settled) <= 3
