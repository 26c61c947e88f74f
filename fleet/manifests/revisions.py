"""A Revision: every object of a repository, validated, with where it was written.

``load_revision`` is a pure function from file contents to a Revision, so
the controller (files from a git object store), ``fleetctl`` (a checkout, via
:func:`fleet.manifests.trees.read_tree`) and the tests (dicts) share it.
Nothing stops at the first problem: each file, document and object that
fails becomes a finding and the rest is still loaded, so one run of
``fleetctl validate`` reports everything.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from fleet.manifests import registry
from fleet.manifests.bases import Model, share_field_sets
from fleet.manifests.caches import ParseCache
from fleet.manifests.deprecations import as_v1, deprecated_api
from fleet.manifests.findings import Finding
from fleet.manifests.kinds import API_VERSION as FLEET_API_VERSION
from fleet.manifests.limits import Limits
from fleet.manifests.locations import Location, Positions
from fleet.manifests.salvages import moved, salvage
from fleet.manifests.validations import findings_from
from fleet.manifests.yamls import Document, parse

_RELEASED: Any = object()


class _Remade:
    """``Manifest.model``: the validated model, or, once ``Manifest.release`` let it go, the model
    validated again from ``data`` when next read (and kept). A data descriptor: the dataclass's
    ``__init__`` and ``replace`` set the field through it, and its default is None."""

    def __get__(self, manifest: Manifest | None, owner: type | None = None) -> Model | None:
        if manifest is None:
            return None
        found: Model | None = manifest.__dict__["_model"]
        if found is _RELEASED:
            model_class = registry.MODELS[(manifest.api_version, manifest.kind)]
            # without ``share_field_sets``: a full check makes 10,000 again and lets them go after,
            # and the walk would cost as much as validating them
            found = model_class.model_validate(manifest.data)
            manifest.__dict__["_model"] = found  # two threads may both make it: equal models
        return found

    def __set__(self, manifest: Manifest, value: Model | None) -> None:
        manifest.__dict__["_model"] = value


@dataclass(frozen=True)
class Manifest:
    """One object as written in the repository (or as an overlay left it).

    ``model`` is the validated pydantic object for fleet and DRA kinds, and
    ``None`` for any other Kubernetes kind (kept so that policy can say why it
    does not belong). ``data`` is the plain mapping, ``positions`` locates
    each of its fields.
    """

    file: str
    api_version: str
    kind: str
    name: str
    namespace: str | None
    data: dict[str, Any]
    positions: Positions
    model: _Remade = _Remade()  # read as Model | None, and set as one
    team: str | None = None
    """The folder name for files under ``teams/<team>/``, else None (see :func:`team_of`)."""
    memo: dict[str, Any] = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)
    """Values derived from this (immutable) object by the rules, computed once: the policy walks a
    claim's requests for several rules, and a revision may hold 10,000 claims. Not an init field:
    ``dataclasses.replace`` (an overlay's patched copy) starts with an empty memo."""
    salvaged: bool = False
    """The object failed its schema; ``model``/``data`` are what was left after dropping the
    offending fields (:mod:`fleet.manifests.salvages`), kept so the other rules still run."""

    @property
    def location(self) -> Location:
        return self.positions.root

    def release(self) -> None:
        """Drop what is made again when read: the position maps (``Positions.release``) and the model,
        validated again from ``data`` (the controller keeps 10,000 manifests between commits, and
        their models were the largest part of them; a check that reads them again makes them
        again), with the memo of the claim's requests, which holds parts of it. A salvaged model
        (``data`` alone does not validate) and one not validated from ``data`` itself stay."""
        self.positions.release()
        model = self.__dict__["_model"]
        if model is None or model is _RELEASED or self.salvaged:
            return
        if type(model) is registry.MODELS.get((self.api_version, self.kind)):
            self.memo.pop("requests", None)
            self.__dict__["_model"] = _RELEASED

    @property
    def released(self) -> bool:
        """Whether the model was let go (``release``) and not made again since."""
        return self.__dict__["_model"] is _RELEASED

    @property
    def ref(self) -> str:
        """``Kind/namespace/name`` or ``Kind/name``: how findings and logs name it."""
        return "/".join(p for p in (self.kind, self.namespace, self.name) if p)

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """(group, kind, namespace, name): two manifests with it equal clash."""
        return (registry.group_of(self.api_version), self.kind, self.namespace or "", self.name)


def team_of(file: str) -> str | None:
    """``teams/<team>/...`` → ``<team>``; None for files outside a team folder."""
    parts = file.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "teams" else None


@dataclass(frozen=True)
class Revision:
    """All manifests of a repository and what was wrong loading it."""

    manifests: tuple[Manifest, ...]
    findings: tuple[Finding, ...] = ()

    def of_kind(self, kind: str) -> list[Manifest]:
        return [m for m in self.manifests if m.kind == kind and m.model is not None]


def load_revision(
    files: Mapping[str, bytes],
    *,
    limits: Limits | None = None,
    findings: tuple[Finding, ...] = (),
    cache: ParseCache | None = None,
    share: bool = True,
) -> Revision:
    """Parse and validate every file (path relative to the repo root → bytes).

    ``findings`` are carried into the Revision (those of reading the tree). With a
    ``cache``, a file whose path and content were parsed before is not parsed again.
    ``share``: the models share their field sets (``share_field_sets``), memory for a
    revision that is kept or large, at a walk of every model (docs/benchmarks.md).
    """
    limits = limits or Limits()
    manifests: list[Manifest] = []
    found: list[Finding] = list(findings)
    for file in sorted(files):
        problem = check_path(file)
        if problem is not None:
            found.append(problem)
            continue
        key = ParseCache.key(file, files[file], limits) if cache is not None else None
        parsed = cache.get(key) if cache is not None and key is not None else None
        if parsed is None:
            parsed = load_file(file=file, content=files[file], limits=limits, share=share)
            if cache is not None and key is not None:
                cache.put(key, parsed)
        manifests.extend(parsed[0])
        found.extend(parsed[1])
    if cache is not None:
        cache.sweep()
    return Revision(manifests=tuple(manifests), findings=tuple(found))


def load_file(
    *, file: str, content: bytes, limits: Limits, share: bool = True
) -> tuple[tuple[Manifest, ...], tuple[Finding, ...]]:
    """The manifests of one file and the findings about it (``share``: as in ``load_revision``)."""
    manifests: list[Manifest] = []
    found: list[Finding] = []
    documents, problems = parse(file=file, content=content, limits=limits)
    found.extend(problems)
    for document in documents:
        manifest, problems = _manifest(document, share=share)
        found.extend(problems)
        if manifest is not None:
            manifests.append(manifest)
    return tuple(manifests), tuple(found)


def check_path(file: str) -> Finding | None:
    """Refuse absolute paths and ``..``: a revision never reads outside itself."""
    if file.startswith("/") or ".." in file.split("/") or "\\" in file:  # as PurePosixPath's parts, without it
        return Finding(
            Location(file),
            "path-escape",
            f"path {file!r} leaves the repository",
            hint="use paths relative to the repository root, without '..'",
        )
    return None


def _manifest(document: Document, *, share: bool = True) -> tuple[Manifest | None, list[Finding]]:
    data = document.data
    where = document.location
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("kind"), str)
        or not isinstance(data.get("apiVersion"), str)
    ):
        return None, [
            Finding(
                where,
                "schema",
                "document is not a Kubernetes object (apiVersion and kind)",
                hint="start the document with apiVersion: and kind:",
            )
        ]
    api_version, kind = data["apiVersion"], data["kind"]
    raw = data.get("metadata")
    metadata: dict[str, Any] = raw if isinstance(raw, dict) else {}
    name = str(metadata.get("name") or "")
    namespace = metadata.get("namespace")
    ref = "/".join(p for p in (kind, str(namespace or ""), name) if p)
    if api_version in registry.DEPRECATED_VERSIONS:
        return _deprecated(document, api_version=api_version, kind=kind, ref=ref, name=name, namespace=namespace)
    unknown = _unknown_kind(document=document, api_version=api_version, kind=kind, obj=ref)
    if unknown is not None:
        return None, [unknown]
    model_class = registry.MODELS.get((api_version, kind))
    model: Model | None = None
    problems: list[Finding] = []
    salvaged = False
    positions = document.positions
    if model_class is not None:
        try:
            model = model_class.model_validate(data)
        except ValidationError as err:
            problems = findings_from(err, model=model_class, positions=document.positions, obj=ref)
            rescued = salvage(data, model=model_class, error=err, positions=document.positions)
            if rescued is None:
                return None, problems
            model, data, positions = rescued
            salvaged = True
    elif not name:
        return None, [Finding(where, "schema", f"{kind} has no metadata.name", hint="add metadata.name", object=ref)]
    if model is not None and share:
        share_field_sets(model)
    manifest = Manifest(
        file=document.file,
        api_version=api_version,
        kind=kind,
        name=name,
        namespace=str(namespace) if namespace else None,
        data=data,
        positions=positions,
        model=model,
        team=team_of(document.file),
        salvaged=salvaged,
    )
    return manifest, problems


def _deprecated(
    document: Document, *, api_version: str, kind: str, ref: str, name: str, namespace: Any
) -> tuple[Manifest | None, list[Finding]]:
    """The ``deprecated-api`` finding, and the object read in its v1 shape so every other rule still runs."""
    finding = deprecated_api(document=document, api_version=api_version, kind=kind, obj=ref)
    converted = as_v1(document.data, kind=kind, api_version=api_version)
    model_class = registry.MODELS.get(("resource.k8s.io/v1", kind))
    if converted is None or model_class is None:
        return None, [finding]
    data, edits = converted
    try:
        model = model_class.model_validate(data)
    except ValidationError:
        return None, [finding]  # the schema of the old version differs further; --fix first, then validate
    manifest = Manifest(
        file=document.file,
        api_version="resource.k8s.io/v1",
        kind=kind,
        name=name,
        namespace=str(namespace) if namespace else None,
        data=data,
        positions=moved(document.positions, edits=edits),
        model=model,
        team=team_of(document.file),
        salvaged=True,
    )
    return manifest, [finding]


def _unknown_kind(*, document: Document, api_version: str, kind: str, obj: str) -> Finding | None:
    if (api_version, kind) in registry.MODELS:
        return None  # the common case, answered without building the lists below
    group = registry.group_of(api_version)
    if group not in (registry.group_of(FLEET_API_VERSION), "resource.k8s.io"):
        return None
    served = sorted({v for v, _ in registry.MODELS if registry.group_of(v) == group})
    known = sorted(k for v, k in registry.MODELS if v == served[0])
    if api_version not in served:
        return Finding(
            document.positions.at(("apiVersion",)),
            "unknown-kind",
            f"apiVersion {api_version} is not known",
            hint=f"use {served[0]}",
            object=obj,
        )
    if kind in known:
        return None
    close = difflib.get_close_matches(kind, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"known kinds: {', '.join(known)}"
    return Finding(
        document.positions.at(("kind",)),
        "unknown-kind",
        f"unknown kind {kind!r} in {api_version}",
        hint=hint,
        object=obj,
    )


__all__ = ["Manifest", "Revision", "check_path", "load_file", "load_revision", "team_of"]
