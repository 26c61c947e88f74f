"""Equal parts of watched objects are kept once; different or colliding ones are not merged."""

from __future__ import annotations

import copy
import json
from typing import Any

from fleet.kube.shapes import Shapes, intern_metadata


def _live(name: str, *, team: str = "a", count: int = 1) -> dict[str, Any]:
    """A ResourceClaimTemplate as the API server returns it (decoded on its own, as each watch event is)."""
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": name,
            "namespace": team,
            "uid": f"uid-{name}",
            "labels": {"app.kubernetes.io/managed-by": "fleet", "fleet.gpufleet.dev/team": team},
            "managedFields": [
                {
                    "manager": "fleet",
                    "operation": "Apply",
                    "time": "2026-12-03T10:00:00Z",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:app.kubernetes.io/managed-by": {}}}, "f:spec": {}},
                },
            ],
        },
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"count": count}}]}}},
    }
    return json.loads(json.dumps(obj))  # nothing shared with another call's object


def test_equal_parts_are_one_object_and_the_objects_stay_equal() -> None:
    shapes = Shapes()
    a, b = _live("a"), _live("b")
    shared = [shapes.share(_live(n)) for n in ("a", "b")]
    assert shared == [a, b], "sharing changes no value"
    one, two = shared
    assert one["spec"] is two["spec"]
    assert one["metadata"]["labels"] is two["metadata"]["labels"]
    assert one["metadata"]["managedFields"][0]["fieldsV1"] is two["metadata"]["managedFields"][0]["fieldsV1"]
    assert one["metadata"] is not two["metadata"], "names and uids differ: metadata itself is not shared"


def test_different_parts_stay_apart() -> None:
    shapes = Shapes()
    one = shapes.share(_live("a", team="a", count=1))
    two = shapes.share(_live("b", team="b", count=2))
    assert one["spec"] is not two["spec"] and two["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    assert two["metadata"]["labels"]["fleet.gpufleet.dev/team"] == "b"
    fields = [o["metadata"]["managedFields"][0]["fieldsV1"] for o in (one, two)]
    assert fields[0] is fields[1], "only the field sets were equal"


def test_a_hash_collision_shares_nothing() -> None:
    shapes = Shapes()
    first = shapes.share(_live("a"))
    for key in list(shapes.table):  # every entry now answers for another value under the same hash
        shapes.table[key] = {"not": "the same"}
    second = shapes.share(_live("b"))
    assert second["spec"] == first["spec"] and second["spec"] is not first["spec"]
    assert second["metadata"]["labels"] == first["metadata"]["labels"]


def test_the_table_is_cleared_at_its_limit() -> None:
    shapes = Shapes(limit=4)
    for count in range(10):
        shapes.share(_live(f"t{count}", count=count))
    assert len(shapes.table) <= 4
    again = shapes.share(_live("x", count=9))
    assert again["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 9


def test_renewing_keeps_only_the_shapes_live_objects_hold() -> None:
    shapes = Shapes()
    kept = [shapes.share(_live(f"t{i}")) for i in range(3)]
    for count in range(2, 12):  # each commit changes the template: a new spec shape, the old one left
        shapes.share(_live("changing", count=count))
    before = len(shapes)
    shapes.renew(kept)
    assert len(shapes) < before
    assert len(shapes) == len(
        {id(v) for o in kept for v in (o["spec"], o["metadata"]["labels"])}
        | {id(e["fieldsV1"]) for o in kept for e in o["metadata"]["managedFields"]}
    )
    again = shapes.share(_live("t9"))
    assert again["spec"] is kept[0]["spec"], "what live objects hold is still shared"


def test_repeated_metadata_strings_are_one_string_and_the_object_unchanged() -> None:
    def watched(name: str, uid: str) -> dict[str, Any]:
        decoded = json.loads(  # as a watch event's object is decoded: strings of its own
            json.dumps(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaimTemplate",
                    "metadata": {
                        "name": name,
                        "namespace": "team-a",
                        "uid": uid,
                        "creationTimestamp": "2026-12-06T21:00:00Z",
                        "annotations": {"fleet.gpufleet.dev/revision": "0123abcd" * 5, "long": "x" * 65},
                        "managedFields": [{"manager": "fleet", "operation": "Apply", "time": "2026-12-06T21:00:00Z"}],
                    },
                }
            )
        )
        assert isinstance(decoded, dict)
        return decoded

    a, b = watched("a", "uid-a"), watched("b", "uid-b")
    before = copy.deepcopy(a)
    assert intern_metadata(a) is a and a == before
    intern_metadata(b)
    ma, mb = a["metadata"], b["metadata"]
    assert a["apiVersion"] is b["apiVersion"] and a["kind"] is b["kind"]
    assert ma["namespace"] is mb["namespace"] and ma["creationTimestamp"] is mb["creationTimestamp"]
    assert ma["annotations"]["fleet.gpufleet.dev/revision"] is mb["annotations"]["fleet.gpufleet.dev/revision"]
    assert ma["annotations"]["long"] is not mb["annotations"]["long"]  # longer values are left alone
    assert all(ma["managedFields"][0][k] is mb["managedFields"][0][k] for k in ("manager", "operation", "time"))
    assert intern_metadata({"metadata": None}) == {"metadata": None}
