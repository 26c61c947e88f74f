"""The real H100 run of tests/data/real-gpu, read as the tests need it: plain dicts, as the API returned them."""

from __future__ import annotations

import json
from typing import Any

import yaml

from tests import paths

CAPTURE = paths.REAL_GPU
EXAMPLE_FLEET = paths.ROOT / "examples" / "fleet"
TEMPLATES = {
    "ml-research": ("h100-gpu", "single-gpu", "large-memory-gpu", "two-gpus"),
    "inference": ("single-gpu", "h200-or-h100", "hopper-large-memory"),
}
"""The example fleet's templates, by team folder."""


def _load(name: str) -> Any:
    text = (CAPTURE / name).read_text()
    return json.loads(text) if name.endswith(".json") else yaml.safe_load(text)


def slices() -> list[dict[str, Any]]:
    return list(_load("resourceslices.json")["items"])


def device() -> dict[str, Any]:
    [only] = [d for s in slices() for d in s["spec"]["devices"]]
    return dict(only)


def claim() -> dict[str, Any]:
    [only] = _load("resourceclaims.json")["items"]
    return dict(only)


def pod() -> dict[str, Any]:
    return dict(_load("pod.json"))


def device_class() -> dict[str, Any]:
    return dict(_load("deviceclass-gpu.nvidia.com.yaml"))


def template() -> dict[str, Any]:
    return dict(_load("resourceclaimtemplate-h100-gpu.yaml"))


def cdi_spec() -> dict[str, Any]:
    return dict(_load("cdi-spec-of-the-claim.yaml"))


def nvidia_smi_uuids() -> list[str]:
    """The UUIDs ``nvidia-smi -L`` printed inside the container."""
    lines = (CAPTURE / "exec-nvidia-smi-L.txt").read_text().splitlines()
    return [line.rpartition("(UUID: ")[2].rstrip(")") for line in lines if "(UUID: " in line]


def example(team: str, name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((EXAMPLE_FLEET / "teams" / team / f"{name}.yaml").read_text()))


def example_class(name: str = "gpu.nvidia.com") -> dict[str, Any]:
    return dict(yaml.safe_load((EXAMPLE_FLEET / "deviceclasses" / f"{name}.yaml").read_text()))
