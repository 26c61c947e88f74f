"""The pieces of an imported repository: its documents, what could not be mapped, and clean objects.

``clean`` turns a live object into what a person writes: of ``metadata`` only what a
repository may set stays (name, namespace, labels, annotations), so every field the
server or a controller sets goes (``uid``, ``resourceVersion``, ``managedFields``,
``finalizers`` such as the API server's ``resource.kubernetes.io/delete-protection`` on a
claim in use, ``ownerReferences``, ``generateName``...), as do ``status``, kubectl's
``last-applied-configuration``, Helm's ownership marks and the defaults the API server
fills in (a template's empty claim ``metadata``, a request's ``allocationMode: ExactCount``
and, with it, ``count: 1``). A field kept that the schema refuses would make the import's
own output fail ``validate``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from fleet.engine import ledgers, normalizations, ownership

WRITTEN_METADATA = ("name", "namespace", "labels", "annotations")
"""The ``metadata`` a repository declares (``fleet.manifests.bases.ObjectMeta``); the rest is the server's."""
SERVER_ANNOTATIONS = normalizations.VOLATILE_ANNOTATIONS
OTHER_TOOLS_PREFIXES = ("meta.helm.sh/",)


@dataclass(frozen=True)
class Document:
    """One file of the repository: its path, its object and where the object came from."""

    path: str
    body: dict[str, Any]
    comment: str


@dataclass(frozen=True)
class Unmapped:
    """Something in the cluster the repository does not declare, and why."""

    what: str
    reason: str


@dataclass
class Imported:
    documents: list[Document] = field(default_factory=list)
    unmapped: list[Unmapped] = field(default_factory=list)
    handover: dict[str, ledgers.Origin] = field(default_factory=dict)
    """``Ref.key`` → the origin the import's first apply records for it."""


def clean(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without what the server and other tools set, keys in the order people write them."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k in WRITTEN_METADATA}
    annotations = {
        k: v
        for k, v in (meta.pop("annotations", None) or {}).items()
        if k not in SERVER_ANNOTATIONS and not k.startswith(OTHER_TOOLS_PREFIXES)
    }
    labels = {k: v for k, v in (meta.pop("labels", None) or {}).items() if k != ownership.MANAGED_BY}
    tidy: dict[str, Any] = {"name": meta.pop("name")}
    if meta.get("namespace"):
        tidy["namespace"] = meta.pop("namespace")
    meta.pop("namespace", None)
    if labels:
        tidy["labels"] = labels
    if annotations:
        tidy["annotations"] = annotations
    body: dict[str, Any] = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": tidy}
    for key, value in obj.items():
        if key not in ("apiVersion", "kind", "metadata", "status"):
            body[key] = copy.deepcopy(value)
    if obj["kind"] in ("ResourceClaimTemplate", "ResourceClaim"):
        _without_request_defaults(body)
    return body


def _without_request_defaults(body: dict[str, Any]) -> None:
    """A request's server defaults removed: ``allocationMode: ExactCount`` and, with it, ``count: 1``."""
    spec = body.get("spec") or {}
    if spec.get("metadata") == {}:
        spec.pop("metadata")  # a template's claim metadata, defaulted to {}
    devices = (spec.get("spec") if body["kind"] == "ResourceClaimTemplate" else spec) or {}
    for request in (devices.get("devices") or {}).get("requests") or ():
        for exact in [request.get("exactly"), *(request.get("firstAvailable") or ())]:
            if not isinstance(exact, dict) or exact.get("allocationMode", "ExactCount") != "ExactCount":
                continue
            exact.pop("allocationMode", None)
            if exact.get("count") == 1:
                exact.pop("count")


def annotate(body: dict[str, Any], key: str, value: str) -> None:
    body["metadata"].setdefault("annotations", {})[key] = value


def origin(kind: str, name: str, obj: dict[str, Any], context: str) -> str:
    where = f"{kind} {name}, read from context {context}"
    by = ownership.owners(obj)
    return f"{where} (managed by {', '.join(by)})" if by else where


__all__ = ["WRITTEN_METADATA", "Document", "Imported", "Unmapped", "annotate", "clean", "origin"]
