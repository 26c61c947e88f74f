"""Pure: namespaces that hold claim templates, as Teams.

A namespace holding ResourceClaimTemplates (or claims made by hand) becomes a Team of
that name. Its owners are the subjects whose rights there, by the rules of the Roles and
ClusterRoles their RoleBindings there bind, compared verb by verb, already include everything
fleet's team Role grants: binding them to it grants nothing new. Every other subject is a row
saying what it lacks, and its bindings stay outside the repository, as they are: a take-over
never grants rights nobody had. Its quota is the ResourceQuota ``fleet-devices`` when it has exactly the keys
fleet renders. Templates and claims people made (kubectl) become fleet's (``created``:
pruning deletes them), those another tool keeps (Helm, an owner object) are adopted, as
are the namespace and the fleet-shaped Role, RoleBinding and quota. A namespace labelled
``resource.kubernetes.io/admin-access: "true"`` makes the Team ``adminAccess: true``; its other
labels and annotations are listed (a Team declares none).

A namespace where no owners are found gets a Team with ``owners: []`` and a row saying to fill
them in: the import grants no subject it guessed. Fleet's RoleBinding then binds the team's
ServiceAccount alone, as which fleet writes the team's objects (``fleet.engine.impersonations``);
without it the take-over could not write the templates as the team.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from fleet.engine import impersonations, ownership
from fleet.engine.imports import owners
from fleet.engine.imports.documents import Document, Imported, Unmapped, annotate, clean, origin
from fleet.engine.imports.lives import Live
from fleet.engine.renders import CLAIM_RESOURCES, CLAIM_VERBS, QUOTA_NAME, TEAM_ROLE, quota_keys
from fleet.kube import Ref
from fleet.manifests import kinds
from fleet.policy import tenancy


def teams(
    live: Live,
    *,
    templates: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    cluster: str,
    context: str,
    classes: dict[str, dict[str, Any]],
    operator_ns: str,
    out: Imported,
) -> None:
    by_ns: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in templates:
        by_ns[str(t["metadata"]["namespace"])].append(t)
    generated = 0
    for c in claims:
        if _generated(c):
            generated += 1
            continue
        by_ns[str(c["metadata"]["namespace"])].append(c)
    if generated:
        out.unmapped.append(
            Unmapped(
                f"{generated} ResourceClaim(s) made for pods from templates",
                "they belong to their pods (ownerReferences), not to the repository",
            )
        )
    _bare_namespaces(live, holding=set(by_ns), operator_ns=operator_ns, out=out)
    extended = _extended(live, classes)
    for ns, objs in sorted(by_ns.items()):
        why = tenancy.reserved(ns, operator_namespace=operator_ns)
        if why:
            for o in objs:
                out.unmapped.append(
                    Unmapped(
                        f"{o['kind']} {ns}/{o['metadata']['name']}",
                        f"namespace {ns} is {why.removeprefix('which is ')}: fleet gives no team a reserved "
                        "namespace; move it to a namespace of its own",
                    )
                )
            continue
        objs = _declarable(ns, objs, classes=set(classes), out=out)
        if objs:
            _team(
                ns, objs, live=live, cluster=cluster, context=context, extended=extended, classes=set(classes), out=out
            )


def _bare_namespaces(live: Live, *, holding: set[str], operator_ns: str, out: Imported) -> None:
    """A row per namespace people made that holds no template or claim of its own: no Team declares it."""
    for n in sorted(live.namespaces, key=lambda n: str(n["metadata"]["name"])):
        ns = str(n["metadata"]["name"])
        if ns in holding or ownership.managed(n) or tenancy.reserved(ns, operator_namespace=operator_ns):
            continue
        out.unmapped.append(
            Unmapped(
                f"Namespace {ns}",
                "it holds no ResourceClaimTemplate or ResourceClaim of its own, so no Team declares it (a Team "
                "is made for a namespace that holds them); it stays as it is",
            )
        )


POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
"""The annotation the resourceclaim controller puts on each claim it makes from a pod's template."""


def _generated(claim: dict[str, Any]) -> bool:
    """Whether the resourceclaim controller made ``claim`` for a pod (its annotation, or an owner object):
    it belongs to the pod, never to the repository."""
    meta = claim.get("metadata") or {}
    return bool(meta.get("ownerReferences") or POD_CLAIM_NAME in (meta.get("annotations") or {}))


def _declarable(ns: str, objs: list[dict[str, Any]], *, classes: set[str], out: Imported) -> list[dict[str, Any]]:
    """The templates and claims whose DeviceClasses the repository declares; the others listed.

    A repository that names a class it does not declare does not validate: a class deleted by
    hand after its templates were made, or one fleet manages for another cluster (not imported)."""
    kept: list[dict[str, Any]] = []
    for o in objs:
        missing = sorted(_classes_named(o) - classes)
        if not missing:
            kept.append(o)
            continue
        out.unmapped.append(
            Unmapped(
                f"{o['kind']} {ns}/{o['metadata']['name']}",
                f"it requests DeviceClass {', '.join(missing)}, which this repository does not declare (the "
                "cluster has none of that name, or fleet manages it for another cluster); it stays as it is",
            )
        )
    return kept


def _extended(live: Live, classes: dict[str, dict[str, Any]]) -> dict[str, str] | None:
    if not live.features.on("DRAExtendedResource"):
        return None
    return {
        name: str(c["spec"]["extendedResourceName"])
        for name, c in classes.items()
        if (c.get("spec") or {}).get("extendedResourceName")
    }


def _team(
    ns: str,
    objs: list[dict[str, Any]],
    *,
    live: Live,
    cluster: str,
    context: str,
    extended: dict[str, str] | None,
    classes: set[str],
    out: Imported,
) -> None:
    used: set[str] = set()
    for o in sorted(objs, key=lambda o: (str(o["kind"]), str(o["metadata"]["name"]))):
        body = clean(o)
        annotate(body, ownership.ADOPT, ownership.ADOPT_VALUE)
        used |= _classes_named(body)
        name = str(o["metadata"]["name"])
        suffix = "" if o["kind"] == "ResourceClaimTemplate" else "-claim"
        out.documents.append(
            Document(f"teams/{ns}/{name}{suffix}.yaml", body, origin(str(o["kind"]), f"{ns}/{name}", o, context))
        )
        out.handover[Ref.of(body).key] = "adopted" if _tools(o) else "created"
    subjects, role_notes = owners.owners(ns, live=live, out=out)
    quota = _quota(ns, live=live, extended=extended, out=out)
    undeclared = sorted(set(quota) - classes)
    if undeclared:
        out.handover.pop(Ref("v1", "ResourceQuota", ns, QUOTA_NAME).key, None)
        out.unmapped.append(
            Unmapped(
                f"ResourceQuota {ns}/{QUOTA_NAME}",
                f"it limits DeviceClass {', '.join(undeclared)}, which this repository does not declare; "
                "it stays in the cluster as it is",
            )
        )
        quota = {}
    used |= set(quota)
    spec: dict[str, Any] = {
        "clusters": {"names": [cluster]},
        "namespaces": [ns],
        "owners": subjects,
        "deviceClasses": sorted(used),
    }
    if quota:
        spec["quota"] = quota
    spec["adoptNamespaces"] = True
    if _namespace_metadata(ns, live=live, out=out):
        spec["adminAccess"] = True
    out.handover[Ref("v1", "Namespace", "", ns).key] = "adopted"
    if not subjects:
        out.unmapped.append(
            Unmapped(
                f"the owners of namespace {ns}",
                f"no subject there already has all that fleet's team Role grants ({', '.join(CLAIM_RESOURCES)}: "
                f"{', '.join(CLAIM_VERBS)}), and the import grants no one it guessed: team {ns} is written with "
                f"owners: [], so its RoleBinding {TEAM_ROLE} binds only the team's ServiceAccount "
                f"{impersonations.SERVICE_ACCOUNT} (as which fleet writes the team's objects). Fill in "
                f"spec.owners of teams/{ns}/team.yaml with who claims there and apply",
            )
        )
        role_notes = "; ".join(filter(None, ["owners: none found, fill them in (IMPORT.md)", role_notes]))
    body = {"apiVersion": kinds.API_VERSION, "kind": "Team", "metadata": {"name": ns}, "spec": spec}
    comment = f"namespace {ns} of context {context}, which holds ResourceClaimTemplates" + (
        f"; {role_notes}" if role_notes else ""
    )
    out.documents.insert(len(out.documents) - len(objs), Document(f"teams/{ns}/team.yaml", body, comment))


NAMESPACE_SET = ("kubernetes.io/metadata.name",)
"""The label the API server sets on every namespace."""


def _namespace_metadata(ns: str, *, live: Live, out: Imported) -> bool:
    """Whether namespace ``ns`` carries ``resource.kubernetes.io/admin-access: "true"`` (the Team's
    ``adminAccess: true`` renders it); its other labels and annotations, which a Team does not declare,
    are a row: they stay on the namespace."""
    found = next((n for n in live.namespaces if n["metadata"]["name"] == ns), None)
    if found is None:
        return False
    meta = clean(found)["metadata"]
    labels = dict(meta.get("labels") or {})
    admin = bool(labels.pop(kinds.ADMIN_ACCESS_LABEL, None) == "true")
    kept = [
        f"label {k}={v}"
        for k, v in sorted(labels.items())
        if k not in NAMESPACE_SET and not k.startswith(f"{ownership.DOMAIN}/")
    ]
    kept += [
        f"annotation {k}" for k in sorted(meta.get("annotations") or {}) if not k.startswith(f"{ownership.DOMAIN}/")
    ]
    if kept:
        out.unmapped.append(
            Unmapped(
                f"the metadata of Namespace {ns}",
                f"a Team declares no labels or annotations of its namespaces but fleet's own: {', '.join(kept)} "
                "stay on the namespace as they are",
            )
        )
    return admin


def _tools(obj: dict[str, Any]) -> bool:
    """Whether another tool keeps ``obj`` (a Helm release, another ``managed-by``, an owner object): fleet
    then adopts it (and only releases it when it is pruned), rather than making it its own."""
    meta = obj.get("metadata") or {}
    label = (meta.get("labels") or {}).get(ownership.MANAGED_BY)
    helm_release = (meta.get("annotations") or {}).get(ownership.HELM_RELEASE)
    return bool(helm_release or meta.get("ownerReferences") or (label and label != ownership.MANAGER))


def _classes_named(body: dict[str, Any]) -> set[str]:
    spec = body.get("spec") or {}
    devices = (spec.get("spec") if body["kind"] == "ResourceClaimTemplate" else spec) or {}
    found: set[str] = set()
    for request in (devices.get("devices") or {}).get("requests") or ():
        for exact in [request.get("exactly"), *(request.get("firstAvailable") or ())]:
            if isinstance(exact, dict) and exact.get("deviceClassName"):
                found.add(str(exact["deviceClassName"]))
    return found


DEVICES_KEY = re.compile(r"^(?P<cls>.+)\.deviceclass\.resource\.k8s\.io/devices$")


def _quota(ns: str, *, live: Live, extended: dict[str, str] | None, out: Imported) -> dict[str, int]:
    found: dict[str, int] = {}
    for q in sorted(
        (q for q in live.quotas if q["metadata"].get("namespace") == ns), key=lambda q: str(q["metadata"]["name"])
    ):
        name = str(q["metadata"]["name"])
        hard = {str(k): str(v) for k, v in ((q.get("spec") or {}).get("hard") or {}).items()}
        quota: dict[str, int] = {}
        for key, value in hard.items():
            m = DEVICES_KEY.match(key)
            if m and value.isdigit():
                quota[m.group("cls")] = int(value)
        fits = (
            bool(quota)
            and quota_keys(quota, extended=extended) == hard
            and not (q.get("spec") or {}).get("scopeSelector")
        )
        if fits and name == QUOTA_NAME:
            found = quota
            out.handover[Ref("v1", "ResourceQuota", ns, name).key] = "adopted"
            continue
        reason = (
            f"fleet names a team's quota {QUOTA_NAME}: rename it, or leave it and add spec.quota to the team"
            if fits
            else "its limits are not fleet's per-device-class shape"
        )
        out.unmapped.append(Unmapped(f"ResourceQuota {ns}/{name}", f"{reason}; it stays in the cluster as it is"))
    return found


__all__ = ["teams"]
