"""Frozen models share equal field sets (memory), and still behave as models of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest

from fleet.engine import pipelines
from fleet.engine.pipelines import load_plan
from fleet.manifests import load_revision, resources, revisions
from tests.apply.repos import Repo


def _template(name: str, count: int) -> bytes:
    return (
        f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: {name}\n"
        f"spec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly:\n"
        f"          deviceClassName: gpu.example.com\n          count: {count}\n"
    ).encode()


def test_equal_field_sets_are_one_object_and_copies_get_their_own() -> None:
    one, two = load_revision(
        {"teams/a/one.yaml": _template("one", 1), "teams/a/two.yaml": _template("two", 2)}
    ).manifests
    a, b = one.model, two.model
    assert isinstance(a, resources.ResourceClaimTemplate) and isinstance(b, resources.ResourceClaimTemplate)
    first, second = a.spec.spec.devices.requests[0], b.spec.spec.devices.requests[0]
    assert first.model_fields_set is second.model_fields_set
    assert a.model_fields_set is b.model_fields_set

    with pytest.raises(pydantic.ValidationError):
        first.name = "other"  # type: ignore[misc]  # frozen: the only way pydantic changes a field set
    assert first.model_fields_set == {"name", "exactly"}

    copied = first.model_copy(update={"first_available": []})
    assert "first_available" in copied.model_fields_set
    assert second.model_fields_set == {"name", "exactly"}, "a copy's update does not reach the shared set"
    assert first.exactly is not None and second.exactly is not None
    assert (first.exactly.count, second.exactly.count) == (1, 2)


def test_a_revision_loaded_only_to_be_planned_shares_nothing_below_the_threshold(tmp_path: Path) -> None:
    """Sharing walks every model, about a quarter of the load: a revision loaded only to be planned
    (``fleetctl diff``, no ``LoadCache``) skips it below ``SHARED_ABOVE_FILES`` (issue 38)."""
    files = {"teams/a/one.yaml": _template("one", 1), "teams/a/two.yaml": _template("two", 2)}
    one, two = load_revision(files, share=False).manifests
    assert one.model is not None and two.model is not None
    assert one.model.model_fields_set == two.model.model_fields_set
    assert one.model.model_fields_set is not two.model.model_fields_set

    seen: list[bool] = []
    real = revisions.load_revision

    def spy(*args: Any, **kwargs: Any) -> revisions.Revision:
        seen.append(kwargs["share"])
        return real(*args, **kwargs)

    repo = Repo(root=tmp_path / "repo")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(revisions, "load_revision", spy)
        load_plan(repo.write(), cluster=repo.cluster)
        patch.setattr(pipelines, "SHARED_ABOVE_FILES", 1)
        load_plan(repo.write(), cluster=repo.cluster)
    assert seen == [False, True]
