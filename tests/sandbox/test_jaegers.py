"""Jaeger is built from the pinned Go module, and runs on loopback ports of its own."""

from __future__ import annotations

import re

from fleet.sandbox import jaegers, versions


def test_the_tool_module_pins_the_version_fleet_names() -> None:
    gomod = (jaegers.MODULE / "go.mod").read_text()
    assert f"tool {jaegers.PACKAGE}\n" in gomod
    assert re.search(rf"^\tgithub\.com/jaegertracing/jaeger {re.escape(versions.JAEGER)}\b", gomod, re.M), (
        f"tools/jaeger/go.mod does not require jaeger {versions.JAEGER}: run "
        f"go get -tool {jaegers.PACKAGE}@{versions.JAEGER} there"
    )
