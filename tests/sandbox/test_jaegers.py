"""Jaeger is built from the pinned Go module, and runs on loopback ports of its own."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from fleet.sandbox import jaegers, versions


def test_the_tool_module_pins_the_version_fleet_names() -> None:
    gomod = (jaegers.MODULE / "go.mod").read_text()
    assert f"tool {jaegers.PACKAGE}\n" in gomod
    assert re.search(rf"^\tgithub\.com/jaegertracing/jaeger {re.escape(versions.JAEGER)}\b", gomod, re.M), (
        f"tools/jaeger/go.mod does not require jaeger {versions.JAEGER}: run "
        f"go get -tool {jaegers.PACKAGE}@{versions.JAEGER} there"
    )


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
