"""Response bodies are decoded by orjson, and by json where orjson refuses what json reads."""

from __future__ import annotations

import json
import math

from fleet.kube.clients import decoded as _decoded


def test_a_list_page_decodes_as_json_reads_it() -> None:
    page = {
        "kind": "ResourceClaimTemplateList",
        "metadata": {"resourceVersion": "812", "continue": ""},
        "items": [
            {"metadata": {"name": f"t{i}", "labels": {"team": "ml", "ünï": "çødé"}}, "spec": {"count": i, "f": 0.5}}
            for i in range(50)
        ],
    }
    body = json.dumps(page).encode()
    assert _decoded(body) == json.loads(body) == page


def test_what_orjson_refuses_is_read_by_json() -> None:
    assert _decoded(b'{"note": "\\ud800"}') == {"note": "\ud800"}  # a lone surrogate escape
    assert math.isnan(_decoded(b'{"x": NaN}')["x"])


def test_decoded_objects_share_their_keys() -> None:
    """The watch cache keeps every object decoded from its own event: their keys are one string each."""
    one = _decoded('{"metadata": {"name": "a", "resourceVersion": "1"}}')
    two = _decoded(b'{"metadata": {"name": "b", "resourceVersion": "2"}}')
    assert [next(iter(one)), *one["metadata"]] == ["metadata", "name", "resourceVersion"]
    assert all(a is b for a, b in zip([*one, *one["metadata"]], [*two, *two["metadata"]], strict=True))
