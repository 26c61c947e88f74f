"""Normalising objects and deciding, without a dry-run, that an apply would change nothing."""

from __future__ import annotations

from typing import Any

from fleet.engine import normalizations, ownership


def _live(labels: dict[str, str], managed: dict[str, Any], manager: str = "fleet") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "x",
            "uid": "u",
            "resourceVersion": "7",
            "labels": labels,
            "managedFields": [
                {"manager": manager, "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": managed}
            ],
        },
        "status": {"phase": "Active"},
    }


DESIRED = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"team": "a"}}}
OWNED = {"f:metadata": {"f:labels": {"f:team": {}}}}


def test_bookkeeping_and_status_are_dropped() -> None:
    out = normalizations.normalise(_live({"team": "a"}, OWNED))
    assert out == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"team": "a"}}}


def test_secret_values_are_masked_but_changes_stay_visible() -> None:
    a = normalizations.normalise({"apiVersion": "v1", "kind": "Secret", "data": {"k": "c2VjcmV0"}})
    b = normalizations.normalise({"apiVersion": "v1", "kind": "Secret", "data": {"k": "b3RoZXI="}})
    assert a is not None and b is not None
    assert "c2VjcmV0" not in str(a) and a["data"]["k"].startswith("***")
    assert a != b


def test_fields_of_ignored_managers_are_dropped() -> None:
    live = _live({"team": "a", "other": "z"}, {"f:metadata": {"f:labels": {"f:other": {}}}}, manager="hpa")
    out = normalizations.normalise(live, ignore_managers=["hpa"])
    assert out is not None and out["metadata"]["labels"] == {"team": "a"}


def test_same_fields_same_owner_is_unchanged() -> None:
    assert normalizations.unchanged_without_dry_run(DESIRED, _live({"team": "a", "extra": "b"}, OWNED), manager="fleet")


def test_a_different_value_needs_a_dry_run() -> None:
    assert not normalizations.unchanged_without_dry_run(DESIRED, _live({"team": "b"}, OWNED), manager="fleet")


def test_a_field_fleet_owned_but_no_longer_wants_needs_a_dry_run() -> None:
    owned = {"f:metadata": {"f:labels": {"f:team": {}, "f:old": {}}}}
    assert not normalizations.unchanged_without_dry_run(
        DESIRED, _live({"team": "a", "old": "1"}, owned), manager="fleet"
    )


def test_a_field_another_manager_took_needs_a_dry_run() -> None:
    live = _live({"team": "a"}, OWNED, manager="kubectl-edit")
    assert not normalizations.unchanged_without_dry_run(DESIRED, live, manager="fleet")


def test_atomic_struct_must_match_whole() -> None:
    desired = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "b", "namespace": "n"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
    }
    owned = {"f:roleRef": {}}
    live = {
        **desired,
        "metadata": {
            **desired["metadata"],
            "managedFields": [{"manager": "fleet", "operation": "Apply", "fieldsV1": owned}],
        },
    }
    assert normalizations.unchanged_without_dry_run(desired, live, manager="fleet")
    changed = {**live, "roleRef": {**desired["roleRef"], "extra": "x"}}
    assert not normalizations.unchanged_without_dry_run(desired, changed, manager="fleet")


def test_defaulted_list_items_rely_on_the_applied_hash() -> None:
    desired = ownership.fingerprinted(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": "n"},
            "spec": {"spec": {"devices": {"requests": [{"name": "g"}]}}},
        }
    )
    owned = {
        "f:metadata": {"f:annotations": {f"f:{ownership.APPLIED}": {}}},
        "f:spec": {"f:spec": {"f:devices": {"f:requests": {}}}},
    }
    live = {
        **desired,
        "metadata": {
            **desired["metadata"],
            "managedFields": [{"manager": "fleet", "operation": "Apply", "fieldsV1": owned}],
        },
        "spec": {"spec": {"devices": {"requests": [{"name": "g", "allocationMode": "ExactCount"}]}}},
    }
    assert normalizations.unchanged_without_dry_run(desired, live, manager="fleet")
    stale = {**live, "metadata": {**live["metadata"], "annotations": {ownership.APPLIED: "0" * 20}}}
    assert not normalizations.unchanged_without_dry_run(desired, stale, manager="fleet")


def test_the_applied_hash_never_hides_a_changed_value() -> None:
    # Someone applied another value under fleet's own manager name: fleet still owns the
    # field and the hash still matches, but the value is not what fleet applies.
    desired = ownership.fingerprinted(DESIRED)
    owned = {"f:metadata": {"f:labels": {"f:team": {}}, "f:annotations": {f"f:{ownership.APPLIED}": {}}}}
    live = _live({"team": "a"}, owned)
    live["metadata"]["annotations"] = {ownership.APPLIED: normalizations.annotation(desired, ownership.APPLIED)}
    assert normalizations.unchanged_without_dry_run(desired, live, manager="fleet")
    live["metadata"]["labels"] = {"team": "b"}
    assert not normalizations.unchanged_without_dry_run(desired, live, manager="fleet")


def test_a_quantity_in_the_servers_spelling_is_the_same_value() -> None:
    # A quota of 1000000 is stored as "1M": still no dry-run needed for a no-op.
    key = "gpu.deviceclass.resource.k8s.io/devices"
    desired = ownership.fingerprinted(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "q", "namespace": "n"},
            "spec": {"hard": {key: "1000000"}},
        }
    )
    owned = {"f:metadata": {"f:annotations": {f"f:{ownership.APPLIED}": {}}}, "f:spec": {"f:hard": {f"f:{key}": {}}}}
    live = {
        **desired,
        "metadata": {
            **desired["metadata"],
            "managedFields": [{"manager": "fleet", "operation": "Apply", "fieldsV1": owned}],
        },
        "spec": {"hard": {key: "1M"}},
    }
    assert normalizations.unchanged_without_dry_run(desired, live, manager="fleet")
    live["spec"] = {"hard": {key: "2M"}}
    assert not normalizations.unchanged_without_dry_run(desired, live, manager="fleet")


def test_a_first_apply_that_adds_fleets_marks_certainly_changes_the_object() -> None:
    """What lets a take-over skip the dry-run: fleet's manager owns nothing, so nothing is removed,
    and a mark is missing, so the apply changes the object; either doubt keeps the dry-run."""
    plain = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"team": "a"}}}
    marked = {**plain, "metadata": {**plain["metadata"], "annotations": {ownership.SOURCE: "teams/a.yaml:1:1"}}}
    by_hand = _live({"team": "a"}, OWNED, manager="kubectl-client-side-apply")
    assert normalizations.first_apply_changes(marked, by_hand, manager="fleet")
    assert not normalizations.first_apply_changes(marked, _live({"team": "a"}, OWNED), manager="fleet"), (
        "fleet's manager already owns fields: its apply may remove some"
    )
    assert not normalizations.first_apply_changes(plain, by_hand, manager="fleet"), (
        "every label and annotation is live already: the dry-run may well say unchanged"
    )
    relabelled = _live({"team": "b"}, OWNED, manager="kubectl-client-side-apply")
    assert normalizations.first_apply_changes(plain, relabelled, manager="fleet")


def _by_leaf_paths(desired: dict[str, Any], live: dict[str, Any]) -> bool:
    """What ``same_outside_lists`` answers, leaf path by leaf path from the root (its definition)."""
    return all(
        normalizations._same_value(normalizations.value_at(desired, w), normalizations.value_at(live, w))
        for w in normalizations.desired_leaves(desired)
        if not isinstance(normalizations.value_at(desired, w), list)
    )


def test_one_walk_compares_the_leaves_outside_lists_as_leaf_paths_do() -> None:
    """The no-op shortcut's value check walks both trees once; its answer is the per-path one."""
    desired: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "n", "labels": {"a": "1"}, "annotations": {}},
        "spec": {"hard": {"gpu": "1000000"}, "scopes": ["x"], "empty": {}, "n": None},
    }
    lives: list[Any] = [
        desired,
        {**desired, "metadata": {"name": "other", "namespace": "elsewhere", "labels": {"a": "1"}, "annotations": {}}},
        {**desired, "spec": {"hard": {"gpu": "1M"}, "scopes": ["y", "z"], "empty": {}, "n": None}},
        {**desired, "spec": {"hard": {"gpu": "2M"}, "scopes": ["x"], "empty": {}, "n": None}},
        {**desired, "spec": {"hard": {"gpu": "1000000"}, "scopes": ["x"], "empty": {"k": "v"}, "n": None}},
        {**desired, "spec": {"hard": {"gpu": "1000000"}, "scopes": ["x"], "empty": {}}},
        {**desired, "spec": {"hard": "not a map", "scopes": ["x"], "empty": {}, "n": None}},
        {**desired, "spec": "not a map"},
        {**desired, "metadata": {"name": "q", "namespace": "n", "labels": {"a": "2"}, "annotations": {}}},
        {**desired, "metadata": {"name": "q", "namespace": "n", "labels": {"a": "1"}}},
        {"apiVersion": "v2", "kind": "Other"},
        {},
    ]
    answers = [normalizations.same_outside_lists(desired, live) for live in lives]
    assert answers == [_by_leaf_paths(desired, live) for live in lives]
    assert answers == [True, True, True, False, False, True, False, False, False, False, False, False]


def test_desired_leaves_are_scalars_lists_and_empty_maps_without_the_identity() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n", "labels": {"a": "1"}, "annotations": {}},
        "data": {"k": "v", "l": ["x"], "deep": {"er": {"est": 1}}},
    }
    assert normalizations.desired_leaves(obj) == {
        ("metadata", "labels", "a"),
        ("metadata", "annotations"),
        ("data", "k"),
        ("data", "l"),
        ("data", "deep", "er", "est"),
    }
    assert normalizations.desired_leaves({}) == {()}
