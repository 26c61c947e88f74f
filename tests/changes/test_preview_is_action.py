"""Preview = action for held changes: the window, the waves, the jobs, and the drains that free them.

A pod holds a claim the real scheduler allocated; tightening the DeviceClass past its device is
disruptive. ``diff`` must decide the held change, and under ``spec.disruption.policy: drain`` each
cordon, eviction and uncordon, exactly as ``apply`` then records them (``tests.apply.agreements``);
and what reads the decisions (``ChangeSet.waiting``, the FleetSync's ``status.waiting``, the
``fleet_changes_waiting`` gauge) must say what the decisions say.
"""

from __future__ import annotations

import collections
import textwrap

import pytest

from fleet import engine
from fleet.controller import metrics, sections
from fleet.engine import waits
from fleet.sandbox import Sandbox
from tests.apply.agreements import Compared, compare, compare_cli
from tests.apply.conftest import Engine
from tests.apply.repos import Repo
from tests.changes.test_holds import closed_window, cordoned_for, gone, holding
from tests.conftest import Kubectl, gpu_pod

pytestmark = pytest.mark.sandbox


def held_keys(changes: engine.ChangeSet) -> set[str]:
    return {
        e.ref.key for e in changes.entries if e.decision is not None and e.decision.to_json().get("verdict") == "hold"
    }


def consumers_agree(changes: engine.ChangeSet, *, side: str) -> None:
    """``ChangeSet.waiting``, ``status.waiting`` and the waiting gauge show the changes decided ``hold``."""
    held = held_keys(changes)
    assert held, f"{side}: no change decided hold"
    assert {e.ref.key for e in changes.waiting} == held, f"{side}: ChangeSet.waiting is not what was decided hold"
    rows = {(r["kind"], r["namespace"], r["name"]) for r in sections.waiting_of(changes)}
    decided = {(e.ref.kind, e.ref.namespace, e.ref.name) for e in changes.entries if e.ref.key in held}
    assert rows == decided, f"{side}: status.waiting lists {sorted(rows)}, the decisions hold {sorted(decided)}"
    gauges = metrics.Metrics()
    gauges.record_changeset(changes)
    on = collections.Counter(e.waiting.on for e in changes.entries if e.ref.key in held and e.waiting is not None)
    for waits_for in ("wave", "window", "preview", "claims"):
        value = gauges.registry.get_sample_value("fleet_changes_waiting", {"waits_for": waits_for})
        assert value == on[waits_for], f"{side}: fleet_changes_waiting{{waits_for={waits_for}}} is {value}"


def waiting_on(compared: Compared, *, kind: str, name: str) -> str:
    """What the held entry waits for, asserted the same in the diff and the apply."""
    said = set()
    for changes in (compared.diff, compared.apply):
        [entry] = [e for e in changes.entries if e.ref.kind == kind and e.ref.name == name]
        said.add(entry.waiting.on if entry.waiting is not None else "")
    assert len(said) == 1, f"{kind} {name}: the diff and the apply wait for different things: {said}"
    return said.pop()


def in_two_waves(repo: Repo) -> None:
    """This cluster in wave 2, after a cluster that never reports."""
    west = f"{repo.cluster}-west"
    repo.files["fleet.yaml"] = textwrap.dedent(f"""\
        apiVersion: fleet.gpufleet.dev/v1alpha1
        kind: Fleet
        metadata:
          name: test
        spec:
          clusters: [{west}, {repo.cluster}]
          rollout:
            waves: [[{west}], [{repo.cluster}]]
            bake: 1m
        """)
    repo.files[f"clusters/{west}.yaml"] = textwrap.dedent(f"""\
        apiVersion: fleet.gpufleet.dev/v1alpha1
        kind: Cluster
        metadata:
          name: {west}
        spec:
          kubernetesVersion: "1.36"
        """)


def test_a_change_held_for_the_window_a_wave_or_the_jobs_is_held_in_diff_and_apply(
    team: Repo, sandbox: Sandbox, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, ns = team, team.ns("ml")
    repo.cluster_spec = {"maintenance": closed_window()}
    fleet = Engine(sandbox, repo)
    _, uuid = holding(kubectl, repo, ns)
    try:
        repo.device_class_expression = f"device.attributes['gpu.nvidia.com'].uuid != '{uuid}'"
        repo.claim_template("ml", "one-gpu", count=2)  # safe: goes at once

        # The real CLI: held for the window in both documents, the safe template written in both.
        printed = compare_cli(repo, capsys, what="closed window, fleetctl")
        for side in ("diff", "apply"):
            held = printed.entry(side, kind="DeviceClass", name=repo.device_class_name)
            assert held["decision"]["verdict"] == "hold", (side, held["decision"])
            assert held["decision"].get("verb") == "apply", (side, held["decision"])
            assert held["waiting"]["on"] == "window" and held["waiting"]["intended"] == "configured", (side, held)
            template = printed.entry(side, kind="ResourceClaimTemplate", name="one-gpu")
            assert template["decision"]["verdict"] == "write", (side, template["decision"])
        assert (printed.diff_code, printed.apply_code) == (1, 0)

        # The engine: the same hold, and every consumer of the ChangeSet shows what was decided.
        window = compare(fleet, what="closed window")
        assert window.both(kind="DeviceClass", name=repo.device_class_name)["verdict"] == "hold"
        assert waiting_on(window, kind="DeviceClass", name=repo.device_class_name) == "window"
        consumers_agree(window.diff, side="diff")
        consumers_agree(window.apply, side="apply")

        # A later wave whose earlier wave has not reported: held for the wave, before the window.
        in_two_waves(repo)
        reported = waits.Reported(revision=fleet.plan().revision)
        wave = compare(fleet, reported=reported, what="wave 2")
        assert wave.both(kind="DeviceClass", name=repo.device_class_name)["verdict"] == "hold"
        assert waiting_on(wave, kind="DeviceClass", name=repo.device_class_name) == "wave"
        consumers_agree(wave.apply, side="apply")

        # An emergency skips the waves and the window, never the jobs (policy wait, the default).
        jobs = compare(fleet, reported=reported, emergency="CVE-2026-0001", what="emergency")
        assert jobs.both(kind="DeviceClass", name=repo.device_class_name)["verdict"] == "hold"
        assert waiting_on(jobs, kind="DeviceClass", name=repo.device_class_name) == "claims"
        consumers_agree(jobs.apply, side="apply")
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)


def test_removing_a_template_running_pods_use_is_held_in_diff_and_apply(
    team: Repo, sandbox: Sandbox, kubectl: Kubectl
) -> None:
    """Not a refusal: the removal of a template (or a DeviceClass) that running GPU pods use is
    disruptive, so it is held (here for the closed window), in the preview as in ``apply --prune``."""
    repo, ns = team, team.ns("ml")
    repo.cluster_spec = {"maintenance": closed_window()}
    fleet = Engine(sandbox, repo)
    assert not fleet.apply().failed
    gpu_pod(kubectl, ns, name="worker", template="one-gpu")
    try:
        kubectl("wait", "-n", ns, "pod/worker", "--for=jsonpath={.status.phase}=Running", "--timeout=90s")
        del repo.claims["ml/one-gpu"]
        compared = compare(fleet, prune=True, what="removed template in use")
        decision = compared.both(kind="ResourceClaimTemplate", name="one-gpu")
        assert decision["verdict"] == "hold" and decision.get("verb") == "delete", decision
        assert waiting_on(compared, kind="ResourceClaimTemplate", name="one-gpu") == "window"
        assert kubectl("get", "resourceclaimtemplate", "-n", ns, "one-gpu", check=False).returncode == 0
    finally:
        kubectl("delete", "-n", ns, "pod/worker", "--wait=true", "--timeout=60s", check=False)


def test_a_drain_is_decided_in_the_diff_as_the_apply_records_it(team: Repo, sandbox: Sandbox, kubectl: Kubectl) -> None:
    """Under ``drain``, the cordon is a Change of the Node, the eviction one of the Pod, both in the stage
    of the held change they serve; the uncordon after the run is a Change of the Node in ``record``."""
    repo, ns = team, team.ns("ml")
    repo.cluster_spec = {"disruption": {"policy": "drain", "maxUnavailable": 1}}
    fleet = Engine(sandbox, repo)
    node, uuid = holding(kubectl, repo, ns)
    key = f"resource.k8s.io/DeviceClass//{repo.device_class_name}"
    try:
        repo.device_class_expression = f"device.attributes['gpu.nvidia.com'].uuid != '{uuid}'"

        draining = compare(fleet, what="drain: cordon and evict")
        assert draining.both(kind="DeviceClass", name=repo.device_class_name)["verdict"] == "hold"
        cordon = draining.both(kind="Node", name=node, stage="classes")
        assert cordon["verdict"] == "write" and cordon.get("verb") == "cordon", cordon
        evict = draining.both(kind="Pod", name="trainer", stage="classes")
        assert evict["verdict"] == "write" and evict.get("verb") == "evict", evict
        assert cordoned_for(kubectl, key) == {node}
        gone(kubectl, ns, "trainer", "held")

        drained = compare(fleet, what="drain: the change goes, the node is uncordoned")
        went = drained.both(kind="DeviceClass", name=repo.device_class_name)
        assert went["verdict"] == "write" and went.get("verb") == "apply", went
        uncordon = drained.both(kind="Node", name=node, stage="record")
        assert uncordon["verdict"] == "write" and uncordon.get("verb") == "uncordon", uncordon
        assert cordoned_for(kubectl, key) == set()
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)
        kubectl("uncordon", node, check=False)
