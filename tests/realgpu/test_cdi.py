"""What the plugin prepared (its CDI spec) against what fleet renders for the driver.

fleet hands the driver two things: the DeviceClass ``config`` and the opaque parameters of a
claim's ``devices.config``. Each opaque ``GpuConfig`` the driver acts on leaves a trace in the
CDI spec it writes for the claim (MPS: ``CUDA_MPS_PIPE_DIRECTORY`` and its mounts; exclusive
access: none of them). ``contradictions`` reads the spec against those configs, and against the
claim's allocation: one CDI device ``<claim uid>-<device>`` per allocated device, with that
GPU's device node.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from tests.realgpu import capture

DRIVER = "gpu.nvidia.com"


def opaque_configs(objs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The driver's opaque parameters in DeviceClasses (``spec.config``) and templates or claims."""
    out = []
    for obj in objs:
        spec = obj.get("spec") or {}
        if obj.get("kind") == "ResourceClaimTemplate":
            spec = spec.get("spec") or {}
        configs = spec.get("config") if obj.get("kind") == "DeviceClass" else (spec.get("devices") or {}).get("config")
        for config in configs or ():
            opaque = config.get("opaque") or {}
            if opaque.get("driver") == DRIVER:
                out.append(dict(opaque.get("parameters") or {}))
    return out


def _env(spec: Mapping[str, Any]) -> list[str]:
    edits = [spec.get("containerEdits") or {}, *((d.get("containerEdits") or {}) for d in spec.get("devices") or ())]
    return [e for edit in edits for e in edit.get("env") or ()]


def contradictions(
    configs: Iterable[Mapping[str, Any]], spec: Mapping[str, Any], claim: Mapping[str, Any]
) -> list[str]:
    out = []
    uid = claim["metadata"]["uid"]
    results = [r for r in claim["status"]["allocation"]["devices"]["results"] if r["driver"] == DRIVER]
    devices = {d["name"]: d for d in spec.get("devices") or ()}
    if set(devices) != {f"{uid}-{r['device']}" for r in results}:
        out.append(f"CDI devices {sorted(devices)} are not the claim's allocated devices")
    for r in results:
        nodes = (devices.get(f"{uid}-{r['device']}") or {}).get("containerEdits", {}).get("deviceNodes") or ()
        minor = r["device"].removeprefix("gpu-")
        if [n["path"] for n in nodes] != [f"/dev/nvidia{minor}"]:
            out.append(f"{r['device']}: device nodes {[n['path'] for n in nodes]}, not /dev/nvidia{minor}")
    mps = [e for e in _env(spec) if e.startswith("CUDA_MPS_")]
    configs = list(configs)
    for params in configs:
        if params.get("kind") != "GpuConfig":
            out.append(f"{params.get('kind')} does not configure a whole GPU, which the claim holds")
            continue
        strategy = ((params.get("sharing") or {}).get("strategy")) or "exclusive"
        if strategy == "MPS" and not any(e.startswith("CUDA_MPS_PIPE_DIRECTORY=") for e in mps):
            out.append("MPS sharing is configured, but the CDI spec sets no CUDA_MPS_PIPE_DIRECTORY")
        if strategy != "MPS" and mps:
            out.append(f"{strategy} access is configured, but the CDI spec sets {', '.join(mps)}")
    if not configs and mps:
        out.append(f"no sharing is configured (exclusive), but the CDI spec sets {', '.join(mps)}")
    return out


def rendered() -> list[dict[str, Any]]:
    """What fleet renders for the ml-research team on gpu-west: the GPU class and the team's templates."""
    team = capture.EXAMPLE_FLEET / "teams" / "ml-research"
    templates = [yaml.safe_load(p.read_text()) for p in sorted(team.glob("*.yaml")) if p.name != "team.yaml"]
    return [capture.example_class(), *templates]


def test_the_stored_objects_are_what_fleet_renders() -> None:
    """Nothing fleet renders went missing on the way: the API server stored the class's spec as written."""
    assert capture.device_class()["spec"] == capture.example_class()["spec"]
    assert capture.template()["spec"]["spec"]["devices"].get("config") is None


def test_nothing_fleet_renders_is_missing_from_or_contradicted_by_the_cdi_spec() -> None:
    configs = opaque_configs([*rendered(), capture.device_class(), capture.claim()])
    assert configs == []  # fleet leaves the driver's defaults: a whole GPU, exclusive
    assert contradictions(configs, capture.cdi_spec(), capture.claim()) == []
    assert "NVIDIA_VISIBLE_DEVICES=void" in _env(capture.cdi_spec())


def test_a_config_the_plugin_did_not_apply_is_found() -> None:
    mps = copy.deepcopy(capture.example_class())
    mps["spec"]["config"] = [
        {
            "opaque": {
                "driver": DRIVER,
                "parameters": {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": {"strategy": "MPS"},
                },
            }
        }
    ]
    configs = opaque_configs([mps])
    assert contradictions(configs, capture.cdi_spec(), capture.claim()) == [
        "MPS sharing is configured, but the CDI spec sets no CUDA_MPS_PIPE_DIRECTORY"
    ]
    mig = [{"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig"}]
    assert contradictions(mig, capture.cdi_spec(), capture.claim()) == [
        "MigDeviceConfig does not configure a whole GPU, which the claim holds"
    ]


def test_a_spec_for_another_claim_or_device_is_found() -> None:
    other = copy.deepcopy(capture.claim())
    other["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    assert contradictions([], capture.cdi_spec(), other)[0].startswith("CDI devices")
    moved = copy.deepcopy(capture.claim())
    moved["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-1"
    assert len(contradictions([], capture.cdi_spec(), moved)) == 2
