"""Deprecated ``resource.k8s.io`` versions, refused with the exact v1 rewrite.

A team that copies an old DRA example (v1beta1, Kubernetes 1.32) writes
``requests[].deviceClassName`` directly; v1beta2 and v1 moved those fields
under ``requests[].exactly``. Rather than "unknown field", the finding shows
the rewritten request, so fixing it is copy and paste.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from fleet.manifests.findings import Finding
from fleet.manifests.yamls import Document

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
_EXACT_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
)


def deprecated_api(*, document: Document, api_version: str, kind: str, obj: str) -> Finding:
    """The ``deprecated-api`` finding for one object, with its v1 rewrite."""
    data = document.data
    devices = _devices(data, kind=kind)
    moved = []
    for index, request in enumerate(devices.get("requests") or [] if isinstance(devices, dict) else []):
        if not isinstance(request, dict):
            continue
        flat = {k: request[k] for k in _EXACT_FIELDS if k in request}
        if flat and "exactly" not in request:
            rest = {k: v for k, v in request.items() if k not in flat}
            rewritten = {**rest, "exactly": flat}
            moved.append(f"requests[{index}] → {_flow(rewritten)}")
    hint = "change apiVersion to resource.k8s.io/v1"
    if moved:
        hint += "; move deviceClassName/selectors/allocationMode/count/adminAccess under `exactly:`: "
        hint += "; ".join(moved)
    where = document.positions.at(("apiVersion",))
    return Finding(
        where,
        "deprecated-api",
        f"{api_version} {kind} is deprecated; fleet manages resource.k8s.io/v1 only",
        hint=hint,
        object=obj,
    )


def as_v1(data: dict[str, Any], *, kind: str, api_version: str) -> tuple[dict[str, Any], list[Any]] | None:
    """``data`` in the v1 shape (and the path edits for its positions), so the other rules still run.

    v1beta2 has the v1 shape; v1beta1/v1alpha3 requests get their own fields moved under
    ``exactly:``, as ``fleetctl validate --fix`` rewrites the file. None for other groups.
    """
    if not api_version.startswith("resource.k8s.io/"):
        return None
    converted = copy.deepcopy(data)
    converted["apiVersion"] = "resource.k8s.io/v1"
    edits: list[Any] = []
    if api_version.endswith(("v1beta1", "v1alpha3")):
        devices = _devices(converted, kind=kind)
        requests = devices.get("requests") if isinstance(devices, dict) else None
        base: tuple[str | int, ...] = (
            ("spec", "spec", "devices", "requests")
            if kind == "ResourceClaimTemplate"
            else ("spec", "devices", "requests")
        )
        for index, request in enumerate(requests if isinstance(requests, list) else []):
            if not isinstance(request, dict) or "exactly" in request or "firstAvailable" in request:
                continue
            flat = [k for k in _EXACT_FIELDS if k in request]
            if flat:
                request["exactly"] = {k: request.pop(k) for k in flat}
                edits.append(("nest", (*base, index), frozenset(flat), "exactly"))
    return converted, edits


def _devices(data: dict[str, Any], *, kind: str) -> Any:
    spec = data.get("spec") or {}
    if kind == "ResourceClaimTemplate" and isinstance(spec, dict):
        spec = spec.get("spec") or {}
    return spec.get("devices") or {} if isinstance(spec, dict) else {}


def _flow(value: Any) -> str:
    """A compact YAML flow rendering (JSON is valid YAML flow style)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and not _PLAIN.fullmatch(value):
        return json.dumps(value)
    return str(value)


__all__ = ["as_v1", "deprecated_api"]
