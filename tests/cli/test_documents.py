"""``-o json`` written entry by entry is the text ``json.dumps(indent=2, ensure_ascii=False)`` makes of the whole
document."""

from __future__ import annotations

import io
import json

from fleet.engine import Action, Change, ChangeSet
from fleet.engine.changesets import FieldConflict
from fleet.kube import Ref
from fleetctl import documents


def _changes(n: int) -> ChangeSet:
    entries = [
        Change(
            ref=Ref(api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate", namespace=f"ns-{i}", name=f"t{i}"),
            stage="claims",
            action=Action.CONFIGURED if i % 2 else Action.UNCHANGED,
            error='a "quoted"\nmessage, non-ASCII: é' if i == 1 else "",
            conflicts=(FieldConflict(manager="kubectl-patch", field=".spec.x"),) if i == 2 else (),
            duration=0.125,
        )
        for i in range(n)
    ]
    return ChangeSet(cluster="gpu-east", revision="abc", entries=entries)


def test_the_streamed_document_is_json_dumps_indented_by_two() -> None:
    for n in (0, 1, 3):
        changes = _changes(n)
        tail = {"requests": {"get": 1, "list": 9}, "error": "", "empty": {}, "none": []}
        expected = changes.to_json() | tail
        out = io.StringIO()
        documents.write_changes(out, changes, **tail)
        assert out.getvalue() == json.dumps(expected, indent=2, ensure_ascii=False) + "\n"
        assert json.loads(out.getvalue()) == expected


def test_what_orjson_refuses_is_written_by_the_standard_encoder() -> None:
    out = io.StringIO()
    documents.write_changes(out, _changes(1), huge=2**70)
    assert json.loads(out.getvalue())["huge"] == 2**70


def test_entry_adds_keys_to_each_entry() -> None:
    changes = _changes(2)
    expected = changes.to_json()
    for item in expected["entries"]:
        item["diff"] = f"--- {item['object']['name']}\n+++"
    out = io.StringIO()
    documents.write_changes(out, changes, entry=lambda e: {"diff": f"--- {e.ref.name}\n+++"})
    assert out.getvalue() == json.dumps(expected, indent=2, ensure_ascii=False) + "\n"
    assert json.loads(out.getvalue()) == expected
