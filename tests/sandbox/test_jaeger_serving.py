"""Jaeger as the sandbox runs it: on loopback ports of its own, answering its query API.

Apart from ``test_jaegers.py`` because it needs the built Jaeger (``extras``): a file holds
extras tests only (tests/conftest.py), so the suite's workers take it last, whole.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from fleet.sandbox import jaegers


@pytest.mark.extras("jaeger")
def test_jaeger_listens_on_loopback_only_and_answers_its_query_api(tmp_path: Path) -> None:
    with jaegers.serve(tmp_path) as running:
        assert running.otlp_endpoint.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(f"{running.query_url}/api/services", timeout=10) as response:
            assert json.load(response)["errors"] is None
        config = json.loads((tmp_path / "jaeger.json").read_text())
    endpoints = re.findall(r'"endpoint": "([^"]+)"', json.dumps(config))
    assert len(endpoints) == 3 and all(e.startswith("127.0.0.1:") for e in endpoints), endpoints
    assert config["service"]["telemetry"]["metrics"] == {"level": "none"}, "no fixed port 8888"
