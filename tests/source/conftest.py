"""Fixtures for the git source tests: an upstream repository and a private cache directory.

No sandbox: these tests talk to real git servers on loopback (``gitservers``), not to
Kubernetes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.source.gitservers import Upstream


@pytest.fixture()
def upstream(tmp_path: Path) -> Upstream:
    up = Upstream(tmp_path / "upstream")
    up.commit({"fleet/fleet.yaml": "kind: Fleet\n", "README.md": "hello\n"}, message="first")
    return up


@pytest.fixture()
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"
