"""Helpers for the guide tests: the seed manifests, pods that use a claim template, allocations."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ruamel.yaml import YAML

from tests import paths

SEED = paths.SEED


def seed(name: str, *, namespace: str) -> list[dict[str, Any]]:
    """The guide's manifests (tests/data/guide), moved into the test's namespace."""
    docs = [d for d in YAML(typ="safe").load_all((SEED / name).read_text()) if d]
    for d in docs:
        d["metadata"]["namespace"] = namespace
    return docs


def pod(name: str, *, template: str, namespace: str, claim: str = "gpu") -> dict[str, Any]:
    """The guide's gpu-pod with resourceClaimTemplateName changed, as the guide tells the reader to."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "resourceClaims": [{"name": claim, "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "workload",
                    "image": "ubuntu:22.04",
                    "command": ["bash", "-c"],
                    "args": ["nvidia-smi -L; sleep 3600"],
                    "resources": {"claims": [{"name": claim}]},
                }
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def get_json(kubectl: Callable[..., Any], *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def published_devices(kubectl: Callable[..., Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(pool, device) → the device as published in the ResourceSlices."""
    out = {}
    for s in get_json(kubectl, "resourceslices")["items"]:
        for d in s["spec"].get("devices", []):
            out[(s["spec"]["pool"]["name"], d["name"])] = d
    return out


def allocated(kubectl: Callable[..., Any], namespace: str) -> list[tuple[str, str, str]]:
    """(claim, pool, device) for every allocation result in a namespace."""
    out = []
    for c in get_json(kubectl, "resourceclaims", "-n", namespace)["items"]:
        for r in (c.get("status", {}).get("allocation") or {}).get("devices", {}).get("results", []):
            out.append((c["metadata"]["name"], r["pool"], r["device"]))
    return out


def all_allocated(kubectl: Callable[..., Any]) -> set[tuple[str, str]]:
    """(pool, device) allocated by any claim in the cluster."""
    out = set()
    for c in get_json(kubectl, "resourceclaims", "-A")["items"]:
        for r in (c.get("status", {}).get("allocation") or {}).get("devices", {}).get("results", []):
            out.add((r["pool"], r["device"]))
    return out


def pod_phases(kubectl: Callable[..., Any], namespace: str) -> dict[str, str]:
    pods = get_json(kubectl, "pods", "-n", namespace)["items"]
    return {p["metadata"]["name"]: p["status"].get("phase", "") for p in pods}


def attr(device: dict[str, Any], name: str) -> Any:
    return next(iter(device["attributes"][name].values()))


def memory_mib(device: dict[str, Any]) -> float:
    value = device["capacity"]["memory"]["value"]
    units = {"Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value) / (1024 * 1024)
