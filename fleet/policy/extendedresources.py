"""DeviceClasses that serve an extended resource (``spec.extendedResourceName``, DRAExtendedResource).

A class with ``extendedResourceName: nvidia.com/gpu`` lets a pod that asks
``resources.limits: {nvidia.com/gpu: 1}`` get a device of the class: the
scheduler writes a ResourceClaim for it. The name "should be unique" among a
cluster's classes (``k8s.io/api/resource/v1/types.go``); when two classes share
it, the one created later wins (the scheduler's and the quota's
``extendedresourcecache``: newer creation timestamp first), so which devices such a pod
gets depends on the order the classes were created in — silently. fleet
refuses two classes with the same name on one cluster, pointing at both
(``extended-resource-name``), and a name the API server would refuse
(``IsExtendedResourceName``: qualified, outside ``kubernetes.io``, not
``requests.``-prefixed).

Pure: runs on one cluster's view, after its overlays.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from fleet.manifests import Finding, Manifest, resources

RULE = "extended-resource-name"
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
"""Every class also serves ``deviceclass.resource.kubernetes.io/<class>`` (the implicit name)."""

_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def extended_names(manifests: Sequence[Manifest]) -> dict[str, str]:
    """DeviceClass name → its ``extendedResourceName``, for the classes that have one."""
    return {
        m.name: m.model.spec.extended_resource_name
        for m in manifests
        if isinstance(m.model, resources.DeviceClass) and m.model.spec.extended_resource_name is not None
    }


def problem(name: str) -> str:
    """Why the API server refuses ``name`` as an extended resource name ("" when it takes it)."""
    if "/" not in name:
        return "it needs a domain (e.g. nvidia.com/gpu)"
    if "kubernetes.io/" in name:
        return "the kubernetes.io domain is Kubernetes' own"
    if name.startswith("requests."):
        return "it must not start with requests."
    prefix, _, last = f"requests.{name}".partition("/")
    if "/" in last or not _DNS_SUBDOMAIN.match(prefix) or len(last) > 63 or not _QUALIFIED_NAME.match(last):
        return "requests.<name> must be a qualified name (DNS subdomain / up to 63 letters, digits, '-', '_', '.')"
    return ""


def check(manifests: Sequence[Manifest]) -> Iterator[Finding]:
    first: dict[str, Manifest] = {}
    for manifest in sorted((m for m in manifests if m.kind == "DeviceClass"), key=lambda m: m.name):
        model = manifest.model
        if not isinstance(model, resources.DeviceClass) or model.spec.extended_resource_name is None:
            continue
        name = model.spec.extended_resource_name
        where = manifest.positions.at(("spec", "extendedResourceName"))
        why = problem(name)
        if why:
            yield Finding(
                where,
                RULE,
                f"extendedResourceName {name!r} is not a valid extended resource name: {why}",
                hint="write the name pods ask for in resources.limits, e.g. nvidia.com/gpu",
                object=manifest.ref,
            )
            continue
        other = first.setdefault(name, manifest)
        if other is not manifest:
            there = other.positions.at(("spec", "extendedResourceName"))
            yield Finding(
                where,
                RULE,
                f"DeviceClass {manifest.name!r} serves extended resource {name!r}, as DeviceClass "
                f"{other.name!r} does ({there}): the class created later would silently take every pod "
                f"asking for {name}",
                hint=f"keep {name} on one class; pods can ask for any class by "
                f"{IMPLICIT_PREFIX}<class> without an extendedResourceName",
                object=manifest.ref,
            )


__all__ = ["IMPLICIT_PREFIX", "RULE", "check", "extended_names", "problem"]
