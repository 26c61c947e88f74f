"""A sandbox shaped like the example's gpu-east cluster, shared by the install tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.sandbox import Sandbox, clusters, profiles

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def gpu_east(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """A sandbox with the nodes the example's gpu-east cluster expects.

    The install tests share it and install the overlays in it: client-side (``kubectl apply -k``,
    tests/install/test_overlays.py) and server-side (the others, with ``--force-conflicts`` to take
    the fields a client-side install left), so they pass in whatever order their files run."""
    directory = tmp_path_factory.mktemp("gpu-east")
    sb = clusters.up(directory=directory, profile=profiles.load(ROOT / "examples" / "sandbox" / "gpu-east.yaml"))
    try:
        yield sb
    finally:
        clusters.down(directory=directory)
