"""A write's answer is kept as the gates read it: identity, labels and status, nothing else."""

from __future__ import annotations

from fleet.engine import healths
from fleet.kube import Ref

NAMESPACE = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {
        "name": "ml",
        "labels": {"app.kubernetes.io/managed-by": "fleet"},
        "uid": "u-1",
        "managedFields": [{"manager": "fleet", "fieldsV1": {"f:metadata": {"f:labels": {}}}}],
    },
    "spec": {"finalizers": ["kubernetes"]},
    "status": {"phase": "Active"},
}


def test_the_view_keeps_what_the_gates_read_and_drops_the_rest() -> None:
    view = healths.gate_view(NAMESPACE)
    assert view == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "ml", "labels": {"app.kubernetes.io/managed-by": "fleet"}},
        "status": {"phase": "Active"},
    }
    ref = Ref(api_version="v1", kind="Namespace", namespace="", name="ml")
    assert healths.exist_problems([ref], live={("v1", "Namespace"): {ref.key: view}}) == []
    terminating = healths.gate_view({**NAMESPACE, "status": {"phase": "Terminating"}})
    assert healths.exist_problems([ref], live={("v1", "Namespace"): {ref.key: terminating}}) == [
        f"{ref}: phase is Terminating, not Active"
    ]


def test_an_object_without_status_has_none_in_its_view() -> None:
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t", "namespace": "ml"}, "spec": {"spec": {}}}  # fmt: skip
    assert healths.gate_view(template) == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ml"},
    }
