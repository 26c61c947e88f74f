"""``fleetctl diff``'s text: the changes by stage, one line per object and the fields that change,
whole bodies only for a handful of changes or with ``--full``."""

from __future__ import annotations

import copy
import io
import re
from typing import Any

import pytest

from fleet.engine import Action, Change, ChangeSet
from fleet.engine.decisions import decide
from fleet.engine.disruptions import Disruption
from fleet.engine.previews import field_diff, unified
from fleet.kube import Ref
from fleetctl import reports


@pytest.fixture(autouse=True)
def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)


def decided(change: Change, *, user: str = "") -> Change:
    return change.decided(
        decide(
            action=str(change.action),
            error=change.error,
            wait=change.waiting,
            disruption=change.disruption,
            user=user,
            obj=change.after,
        )
    )


def created(kind: str, name: str, *, stage: str, namespace: str = "", api_version: str = "v1") -> Change:
    body: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}
    if namespace:
        body["metadata"]["namespace"] = namespace
    body["spec"] = {f"field{i}": "x" * 40 for i in range(30)}  # a body worth not printing
    return decided(Change(ref=Ref.of(body), stage=stage, action=Action.CREATED, after=body))


def crd(i: int) -> Change:
    return created(
        "CustomResourceDefinition", f"kind{i:02d}s.nvidia.com", stage="operator", api_version="apiextensions.k8s.io/v1"
    )


def node(pool: str, i: int) -> Change:
    """A Node a pool labels and taints, as the pools stage previews it (the applied hash differs per Node)."""
    name = f"{pool}-{i}"
    live: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **{f"l{j}": "v" for j in range(20)}}},
        "spec": {"providerID": f"kwok://{name}"},
    }
    merged = copy.deepcopy(live)
    merged["metadata"]["labels"]["fleet.gpufleet.dev/pool"] = pool
    merged["metadata"]["annotations"] = {
        "fleet.gpufleet.dev/applied": f"{i:020d}",
        "fleet.gpufleet.dev/source": f"pools/{pool}.yaml",
    }
    merged["spec"]["taints"] = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
    return decided(Change(ref=Ref.of(live), stage="pools", action=Action.CONFIGURED, before=live, after=merged))


def quota(*, hard: str = "4") -> Change:
    return decided(undecided_quota(hard=hard), user="system:serviceaccount:ml:fleet-team")


def undecided_quota(*, hard: str) -> Change:
    before: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "fleet-devices", "namespace": "ml"},
        "spec": {"hard": {"gpu.deviceclass.resource.k8s.io/devices": "8", "pods": "10"}},
    }
    after = copy.deepcopy(before)
    after["spec"]["hard"]["gpu.deviceclass.resource.k8s.io/devices"] = hard
    return Change(ref=Ref.of(before), stage="tenancy", action=Action.CONFIGURED, before=before, after=after)


def namespaces(n: int) -> list[Change]:
    return [created("Namespace", f"team-{i}", stage="namespaces") for i in range(n)]


def text(changes: ChangeSet, *, full: bool = False) -> str:
    out = io.StringIO()
    reports.print_diff(reports.console(out), changes, full=full)
    return out.getvalue()


def of(*entries: Change) -> ChangeSet:
    return ChangeSet(cluster="c", revision="r", entries=list(entries))


def test_a_created_object_is_one_line_with_its_verdict_and_as_whom() -> None:
    found = of(*namespaces(reports.HANDFUL), created("ServiceAccount", "fleet-team", stage="tenancy", namespace="ml"))
    lines = text(found).splitlines()
    assert lines == [
        "namespaces",
        "  + Namespace team-0  write as fleet",
        "  + Namespace team-1  write as fleet",
        "  + Namespace team-2  write as fleet",
        "  + Namespace team-3  write as fleet",
        "  + Namespace team-4  write as fleet",
        "tenancy",
        "  + ServiceAccount ml/fleet-team  write as fleet",
    ]


def test_a_configured_object_shows_only_the_fields_that_change() -> None:
    found = of(*namespaces(reports.HANDFUL), quota())
    lines = text(found).splitlines()
    at = lines.index("  ~ ResourceQuota ml/fleet-devices  write as system:serviceaccount:ml:fleet-team")
    assert lines[at + 1 :] == [
        "      - .spec.hard.gpu.deviceclass.resource.k8s.io/devices: '8'",
        "      + .spec.hard.gpu.deviceclass.resource.k8s.io/devices: '4'",
    ]
    assert "pods" not in "\n".join(lines) and "+++" not in "\n".join(lines)


def test_full_shows_every_body_as_today() -> None:
    found = of(*namespaces(reports.HANDFUL), quota())
    whole = text(found, full=True)
    assert whole == "".join(unified(e) for e in found.entries)
    assert "+++ merged v1/Namespace team-0" in whole and "+  field0: " + "x" * 40 in whole


def test_a_handful_of_changes_shows_their_bodies() -> None:
    handful = of(*namespaces(reports.HANDFUL - 1), quota())
    assert text(handful) == text(handful, full=True) == "".join(unified(e) for e in handful.entries)
    more = of(*namespaces(reports.HANDFUL), quota())
    assert "--- live" not in text(more)
    unchanged = [decided(Change(ref=e.ref, stage=e.stage, action=Action.UNCHANGED)) for e in namespaces(20)]
    assert text(of(*unchanged, quota())) == unified(quota()), "only changes count"


def test_stages_come_in_apply_order_then_prune() -> None:
    gone = Ref(api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate", namespace="ml", name="old")
    uninstalled = Ref(api_version="helm.sh/v3", kind="HelmRelease", namespace="gpu-operator", name="gpu-operator")
    found = of(
        decided(Change(ref=gone, stage="claims", action=Action.DELETED, before={"kind": "ResourceClaimTemplate"})),
        created("ResourceClaimTemplate", "one-gpu", stage="claims", namespace="ml"),
        node("h100", 0),
        decided(Change(ref=uninstalled, stage="operator", action=Action.DELETED, before={"chart": "gpu-operator"})),
        quota(),
        *namespaces(2),
        created("DeviceClass", "gpu.nvidia.com", stage="classes", api_version="resource.k8s.io/v1"),
    )
    lines = text(found).splitlines()
    headers = [line for line in lines if not line.startswith(" ")]
    assert headers == ["namespaces", "operator", "classes", "tenancy", "pools", "claims", "prune"]
    assert lines[lines.index("operator") + 1] == "  - HelmRelease gpu-operator/gpu-operator  write as fleet"
    assert lines[-2:] == ["prune", "  - ResourceClaimTemplate ml/old  write as fleet"]


def test_nodes_a_pool_changes_alike_share_one_block() -> None:
    found = of(*(node("h100", i) for i in range(4)), node("a100", 0), node("a100", 1))
    lines = text(found).splitlines()
    assert lines == [
        "pools",
        "  ~ Node h100-0, h100-1, h100-2, h100-3  write as fleet",
        "      + .metadata.annotations.fleet.gpufleet.dev/source: pools/h100.yaml",
        "      + .metadata.labels.fleet.gpufleet.dev/pool: h100",
        "      + .spec.taints[0]: {effect: NoSchedule, key: nvidia.com/gpu, value: present}",
        "  ~ Node a100-0, a100-1                  write as fleet",
        "      + .metadata.annotations.fleet.gpufleet.dev/source: pools/a100.yaml",
        "      + .metadata.labels.fleet.gpufleet.dev/pool: a100",
        "      + .spec.taints[0]: {effect: NoSchedule, key: nvidia.com/gpu, value: present}",
    ]


def test_errors_holds_and_disruptions_are_one_line_and_the_problems_keep_every_word() -> None:
    from datetime import UTC, datetime

    from fleet.engine.waits import Wait

    claim = Ref(api_version="resource.k8s.io/v1", kind="ResourceClaim", namespace="ml", name="held")
    error = (
        "ResourceClaim ml/held: allocated to pod ml/trainer; fleet does not edit a claim in use\n  hint: delete the pod"
    )
    refused = Change.refusal(claim, stage="claims", error=error).decided(decide(action="skipped", error=error))
    held = undecided_quota(hard="2").replaced(
        disruption=Disruption(reason="tightens the quota: ml/a", claims=("ml/a", "ml/b"))
    )
    window = Wait(on="window", reason="the maintenance window", until=datetime(2026, 12, 12, 2, tzinfo=UTC))
    held = decided(held.held_for(window), user="system:serviceaccount:ml:fleet-team")
    found = of(*namespaces(reports.HANDFUL), held, refused)
    lines = text(found).splitlines()
    [line] = [x for x in lines if "ResourceClaim ml/held" in x]
    assert line == (
        "  ! ResourceClaim ml/held  refuse as fleet: allocated to pod ml/trainer; fleet does not edit a claim in use"
    )
    at = lines.index(next(x for x in lines if "ResourceQuota" in x))
    assert lines[at].startswith("  ~ ResourceQuota ml/fleet-devices  hold as system:serviceaccount:ml:fleet-team: ")
    assert "disruptive (tightens the quota: ml/a): waits for the maintenance window" in lines[at]
    assert lines[at + 1 : at + 4] == [
        "      - .spec.hard.gpu.deviceclass.resource.k8s.io/devices: '8'",
        "      + .spec.hard.gpu.deviceclass.resource.k8s.io/devices: '2'",
        "      disruptive: tightens the quota: ml/a (claims: ml/a, ml/b)",
    ]
    problems = io.StringIO()
    reports.print_problems(reports.console(problems), found)
    assert f"error: {error}" in problems.getvalue(), "the whole error and its hint, as before"
    assert "waits: ResourceQuota ml/fleet-devices (configured): disruptive" in problems.getvalue()


def test_colour_on_a_terminal_and_none_with_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    found = of(*namespaces(reports.HANDFUL), quota())
    monkeypatch.setenv("TERM", "xterm")
    coloured = Terminal()
    reports.print_diff(reports.console(coloured), found)
    assert "\x1b[32m" in coloured.getvalue() and "\x1b[31m" in coloured.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    plain = Terminal()
    reports.print_diff(reports.console(plain), found)
    assert "\x1b[" not in plain.getvalue() and plain.getvalue() == text(found)


def test_the_demo_sized_first_diff_fits_on_two_screens() -> None:
    """The example fleet's first diff: the operator chart's CRDs created and 18 pool Nodes labelled
    (four pools). Its whole bodies run to thousands of lines; the text diff stays under 120 lines,
    summary included, and still names every object."""
    pools = {"a100": 4, "a100-mig": 4, "h100": 5, "h200": 5}
    nodes = [node(pool, i) for pool, n in pools.items() for i in range(n)]
    found = of(*namespaces(2), *(crd(i) for i in range(20)), quota(), *nodes)
    out = io.StringIO()
    console = reports.console(out)
    reports.print_diff(console, found)
    reports.print_problems(console, found)
    reports.print_summary(console, found)
    shown = out.getvalue()
    assert len(shown.splitlines()) < 120, shown
    assert len(text(found, full=True).splitlines()) > 1000
    for entry in found.entries:
        assert re.search(rf"\b{re.escape(entry.ref.name)}\b", shown), entry.ref


def test_field_diff_names_each_changed_leaf_and_leaves_out_fleets_bookkeeping() -> None:
    before: dict[str, Any] = {
        "metadata": {"name": "n", "annotations": {"fleet.gpufleet.dev/applied": "a", "keep": "1"}},
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}], "ports": [1, 2, 3], "gone": {"x": 1}},
        "data": {"script": "echo one\n"},
    }
    after = copy.deepcopy(before)
    after["metadata"]["annotations"] |= {"fleet.gpufleet.dev/applied": "b", "fleet.gpufleet.dev/revision": "c"}
    after["spec"]["taints"].insert(0, {"key": "nvidia.com/gpu", "effect": "NoSchedule"})
    after["spec"]["ports"][1] = 20
    del after["spec"]["gone"]
    after["spec"]["containers"] = [{"name": "x" * 60, "image": "y" * 60}]
    after["data"]["script"] = "echo one\necho two\n"
    ref = Ref(api_version="v1", kind="ConfigMap", namespace="ns", name="n")
    change = Change(ref=ref, stage="tenancy", action=Action.CONFIGURED, before=before, after=after)
    assert field_diff(change) == [
        '- .data.script: "echo one\\n"',
        '+ .data.script: "echo one\\necho two\\n"',
        "+ .spec.containers[0].image: " + "y" * 60,
        "+ .spec.containers[0].name: " + "x" * 60,
        "- .spec.gone.x: 1",
        "- .spec.ports[1]: 2",
        "+ .spec.ports[1]: 20",
        "+ .spec.taints[0]: {effect: NoSchedule, key: nvidia.com/gpu}",
    ]
