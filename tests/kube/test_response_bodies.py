"""Response bodies are decoded by orjson, and by json where orjson refuses what json reads."""

from __future__ import annotations

import json
import math

from fleet.kube.clients import _decoded


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
