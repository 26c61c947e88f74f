"""``fleetctl diff``'s text: the changes by stage, one line per object and the fields that change,
whole bodies only for a handful of changes or with ``--full``."""

from __future__ import annotations

import copy
from typing import Any

from fleet.engine import Action, Change
from fleet.engine.previews import field_diff
from fleet.kube import Ref


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
