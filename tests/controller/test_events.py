"""Which watch events can be drift: a change to what fleet declares, never a status update alone."""

from __future__ import annotations

import copy
from typing import Any

from fleet.controller.intakes import declared_shape


def quota() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "ml", "resourceVersion": "1", "labels": {"team": "ml"}},
        "spec": {"hard": {"count/resourceclaims.resource.k8s.io": "4"}},
        "status": {"used": {"count/resourceclaims.resource.k8s.io": "0"}},
    }


def test_a_status_update_is_not_drift() -> None:
    old, new = quota(), quota()
    new["status"]["used"]["count/resourceclaims.resource.k8s.io"] = "3"
    new["metadata"]["resourceVersion"] = "2"
    new["metadata"]["managedFields"] = [{"manager": "kube-controller-manager", "subresource": "status"}]
    assert declared_shape(new) == declared_shape(old)


def test_a_change_to_spec_labels_or_annotations_can_be_drift() -> None:
    old = quota()
    for edit in (
        lambda o: o["spec"]["hard"].update({"count/resourceclaims.resource.k8s.io": "99"}),
        lambda o: o["metadata"]["labels"].update({"team": "other"}),
        lambda o: o["metadata"].update({"annotations": {"fleet.gpufleet.dev/drift": "report"}}),
        lambda o: o["metadata"].update({"deletionTimestamp": "2026-12-06T00:00:00Z"}),
    ):
        new = copy.deepcopy(old)
        edit(new)
        assert declared_shape(new) != declared_shape(old)
