"""The operator stage: the GPU Operator Helm release, with the DRA guide's checks done for the operator.

The guide installs the GPU Operator by hand (``helm upgrade --install gpu-operator
nvidia/gpu-operator --version=v26.7.0 --set clusterPolicy.deployCR=false --set
gpuCluster.deployCR=true ...``), then waits for ``GPUCluster gpu-cluster``, checks the
DeviceClasses and the ResourceSlices, and on removal deletes GPU workloads and claims
first. The operator stage does each step, in this order:

1. **Observe** (reads only): the release (``helm list``), its user values, every other
   release, ClusterPolicies, the live CRDs. A release whose chart version and values
   equal the declared ones is ``unchanged``: no Helm call writes, no API write.
2. **Preflight** (``fleet.engine.preflights``: Kubernetes >= 1.34.2, the resource.k8s.io/v1
   API, GPU nodes present and Ready), then **guards**, each a refusal naming the reason and
   the fix: a ClusterPolicy beside the GPUCluster path (no in-place conversion); both
   ``deployCR`` values true; a separate
   ``dra-driver-nvidia-gpu`` release, or a CRD of the chart owned by another release; a
   downgrade or a major upgrade without ``spec.upgrade.allowDowngrade|allowMajor``; a
   downgrade or removal while ResourceClaims hold the driver's devices.
3. **CRDs first**: Helm installs ``crds/`` only on first install and never upgrades
   them, so the API server would prune the new fields of an upgraded operator. fleet
   server-side-applies the chart's CRDs (field manager ``fleet``) and waits until they
   are Established. A new CRD that drops a field stored objects use is refused, naming
   the field and the objects.
4. **helm upgrade --install** with exactly the declared values (``--reset-values``),
   labelled ``app.kubernetes.io/managed-by=fleet``. If helm fails, fleet rolls back to
   the last deployed revision from Helm's own history.
5. **Readiness gate** (``Gate.OPERATOR_READY``, woken by watches): GPUCluster ``gpu-cluster`` state ready
   with condition Ready=True, the kubelet-plugin DaemonSet available, the driver's
   DeviceClasses present, ResourceSlices for every node of every pool with the pool's
   model and count. A timeout lists what is missing with conditions and events.

``diff`` shows the release as a version and values diff, and the rendered chart as an
object diff from a server-side dry-run (``helm upgrade --dry-run=server`` renders it
against the live cluster, then each object is dry-run applied).

Each GPU node's driver-upgrade state (the operator's ``nvidia.com/gpu-driver-upgrade-state``
label, ``fleet.engine.drivers``) is carried on the release entry as data (``Change.operator``,
with the chart version deployed) and printed as its reason, during and after an upgrade, by
diff, apply and the controller's FleetSync status alike.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

from fleet import helm
from fleet.engine import healths, normalizations, preflights, stages
from fleet.engine.changesets import Action, Change
from fleet.engine.drivers import (
    UPGRADE_STATE,
    DriverState,
    ReleaseStatus,
    driver_states,
    label_since,
    states_text,
)
from fleet.engine.plans import OperatorRelease, Plan
from fleet.errors import FleetError
from fleet.kube import Client, KubeError, NotFound, Ref
from fleet.kube import watch as kube_watch
from fleet.telemetry import tracing

DRA_DRIVER_CHARTS = ("dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu")
"""The standalone DRA driver chart (renamed from nvidia-dra-driver-gpu): never beside the operator."""
KUBELET_PLUGIN = "nvidia-dra-driver-kubelet-plugin"
DEVICE_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com")
DRIVER = "gpu.nvidia.com"
GPUCLUSTER = Ref(api_version="nvidia.com/v1alpha1", kind="GPUCluster", namespace="", name="gpu-cluster")
CLUSTERPOLICY_API = "nvidia.com/v1"
RELEASE_API = "helm.sh/v3"
PREFLIGHT = ("kubernetes-version", "dra-api", "gpu-nodes")
"""The preflight checks run before an install or upgrade (the ClusterPolicy one is a guard below)."""


class OperatorRefused(FleetError):
    """fleet will not install, upgrade or remove the operator release as declared; nothing was changed.

    ``change`` is the release's entry as a refusal (``refused``, the reason as its error, the
    driver states seen): the controller's status shows it although the run stopped here.
    """

    def __init__(self, what: str, *, where: str = "", hint: str = "", change: Change | None = None) -> None:
        super().__init__(what, where=where, hint=hint)
        self.change = change


def release_ref(*, release: str, namespace: str) -> Ref:
    """The ChangeSet name of a Helm release (``helm.sh/v3 HelmRelease``; no such API object exists)."""
    return Ref(api_version=RELEASE_API, kind="HelmRelease", namespace=namespace, name=release)


# -- pure checks -------------------------------------------------------------------------------


def parse_version(text: str) -> tuple[int, int, int]:
    found = re.match(r"^v?([0-9]+)\.([0-9]+)\.([0-9]+)", text)
    if not found:
        return (0, 0, 0)
    major, minor, patch = (int(x) for x in found.groups())
    return (major, minor, patch)


def version_problem(desired: OperatorRelease, *, running: str | None) -> tuple[str, str] | None:
    """(reason, fix) when going from ``running`` to the declared version needs an explicit allowance."""
    if running is None:
        return None
    old, new = parse_version(running), parse_version(desired.version)
    if new < old and not desired.allow_downgrade:
        return (
            f"{desired.version} is older than the running {running}: a downgrade",
            "set spec.upgrade.allowDowngrade: true if you mean it (after checking the chart's downgrade notes), "
            "or declare a version >= " + running,
        )
    if new[0] > old[0] and not desired.allow_major:
        return (
            f"{running} → {desired.version} crosses a major version",
            "read the operator's upgrade notes, then set spec.upgrade.allowMajor: true for this upgrade",
        )
    return None


def values_problem(values: dict[str, Any]) -> tuple[str, str] | None:
    cp = (values.get("clusterPolicy") or {}).get("deployCR")
    gc = (values.get("gpuCluster") or {}).get("deployCR")
    if cp is True and gc is True:
        return (
            "values set both clusterPolicy.deployCR and gpuCluster.deployCR to true: the device-plugin and DRA "
            "allocation paths would both run",
            "set clusterPolicy.deployCR: false (the GPUCluster path, as in the DRA guide)",
        )
    return None


def dra_release_problem(releases: Iterable[helm.Release], *, desired: OperatorRelease) -> tuple[str, str] | None:
    for r in releases:
        if r.chart_name in DRA_DRIVER_CHARTS and (r.name, r.namespace) != (desired.release, desired.namespace):
            return (
                f"a separate DRA driver release {r.namespace}/{r.name} ({r.chart}) runs beside the operator; "
                "the guide forbids it: the operator manages the DRA driver through GPUCluster gpu-cluster",
                f"uninstall it first (helm uninstall {r.name} -n {r.namespace}), after stopping the pods that use "
                "its claims",
            )
    return None


def crd_owner_problems(
    chart_crds: list[dict[str, Any]], live: dict[str, dict[str, Any]], *, desired: OperatorRelease
) -> list[tuple[str, str]]:
    out = []
    for crd in chart_crds:
        name = crd["metadata"]["name"]
        found = live.get(name)
        if found is None:
            continue
        annotations = (found.get("metadata") or {}).get("annotations") or {}
        owner = annotations.get("meta.helm.sh/release-name")
        owner_ns = annotations.get("meta.helm.sh/release-namespace", "")
        if owner and (owner, owner_ns) != (desired.release, desired.namespace):
            out.append(
                (
                    f"CRD {name} belongs to Helm release {owner_ns}/{owner}; the operator chart ships its own "
                    "(the schemas differ)",
                    f"remove release {owner_ns}/{owner} (or its CRD) before installing the operator",
                )
            )
    return out


def schema_paths(crd: dict[str, Any]) -> dict[str, set[str]]:
    """Per served version, every property path its schema declares (``spec.draDriver.logLevel``)."""
    out: dict[str, set[str]] = {}
    for version in (crd.get("spec") or {}).get("versions") or ():
        schema = ((version.get("schema") or {}).get("openAPIV3Schema")) or {}
        paths: set[str] = set()
        _walk(schema, "", paths)
        out[version["name"]] = paths
    return out


def _walk(node: dict[str, Any], prefix: str, out: set[str]) -> None:
    if node.get("x-kubernetes-preserve-unknown-fields"):
        out.add(prefix + "*")
    for key, child in (node.get("properties") or {}).items():
        path = f"{prefix}{key}"
        out.add(path)
        if isinstance(child, dict):
            _walk(child, path + ".", out)
            items = child.get("items")
            if isinstance(items, dict):
                _walk(items, path + "[].", out)


def dropped_fields(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[str]]:
    """Per version both CRDs serve, the property paths the old schema has and the new one loses."""
    before, after = schema_paths(old), schema_paths(new)
    out: dict[str, list[str]] = {}
    for version, paths in before.items():
        if version not in after:
            continue
        kept = after[version]
        gone = sorted(p for p in paths if p not in kept and not _covered(p, kept))
        if gone:
            out[version] = gone
    return out


def _covered(path: str, kept: set[str]) -> bool:
    parts = path.split(".")
    return any(".".join(parts[:i]) + ".*" in kept for i in range(1, len(parts)))


def uses(obj: dict[str, Any], path: str) -> bool:
    node: Any = obj
    for part in path.split("."):
        if part.endswith("[]"):
            part = part[:-2]
            node = node.get(part) if isinstance(node, dict) else None
            return isinstance(node, list) and bool(node)
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


# -- reading the cluster -----------------------------------------------------------------------


@dataclass
class Observed:
    release: helm.Release | None = None
    values: dict[str, Any] = field(default_factory=dict)
    releases: list[helm.Release] = field(default_factory=list)


async def visible_releases(h: helm.Helm, *, namespace: str) -> list[helm.Release]:
    """Every release when helm may list release Secrets cluster-wide, else those in ``namespace``.

    The in-cluster controller reads Secrets only in the operator's namespace (overlays/gpu-operator
    grants a Role there, not a ClusterRole over every Secret): then the separate-DRA-driver guard
    sees that namespace's releases, and the CRD-ownership guard still sees every other release
    that owns one of the chart's CRDs. A refusal there too is raised (its hint names the overlay).
    """
    try:
        return await h.releases()
    except helm.HelmError as err:
        if not helm.forbidden(err):
            raise
    return await h.releases(namespace=namespace)


async def observe(*, h: helm.Helm, desired: OperatorRelease) -> Observed:
    releases = await visible_releases(h, namespace=desired.namespace)
    found = next((r for r in releases if (r.name, r.namespace) == (desired.release, desired.namespace)), None)
    obs = Observed(releases=releases)
    if found is not None:
        obs.release = await h.release(name=found.name, namespace=found.namespace)
        obs.values = await h.values(name=found.name, namespace=found.namespace)
    return obs


async def _items(client: Client, *, api_version: str, kind: str, **kw: Any) -> list[dict[str, Any]]:
    try:
        k = await client.kind(api_version=api_version, kind=kind)
    except NotFound:
        return []
    try:
        return (await client.list(k, **kw)).items
    except NotFound:  # the CRD went away since discovery
        return []


async def allocated_claims(client: Client, *, node: str | None = None) -> list[str]:
    """``namespace/name (pods A, B)`` for every ResourceClaim allocated devices of the NVIDIA driver
    (on ``node`` only, when given: the driver publishes one pool per node, named after it)."""
    out = []
    for claim in await _items(client, api_version="resource.k8s.io/v1", kind="ResourceClaim"):
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or ()
        if not any(r.get("driver") == DRIVER and (node is None or r.get("pool") == node) for r in results):
            continue
        meta = claim["metadata"]
        pods = [r.get("name") for r in status.get("reservedFor") or () if r.get("resource", "pods") == "pods"]
        held = f" (pods {', '.join(sorted(pods))})" if pods else " (allocated, no pod yet)"
        out.append(f"{meta.get('namespace')}/{meta['name']}{held}")
    return sorted(out)


# -- the stage ---------------------------------------------------------------------------------


@dataclass
class Stage:
    """One run of the operator stage for a plan (``Sync`` calls ``run``; ``diff`` calls it with dry_run)."""

    client: Client
    h: helm.Helm
    plan: Plan
    dry_run: bool = False
    prune: bool = False
    timeout: float = 120.0
    changes: list[Change] = field(default_factory=list)
    changed: bool = False

    @property
    def where(self) -> str:
        source = self.plan.operator.source if self.plan.operator else ""
        return f"{source} (cluster {self.plan.cluster})" if source else f"cluster {self.plan.cluster}"

    def _refuse(self, ref: Ref, problem: tuple[str, str], *, seen: ReleaseStatus) -> None:
        reason, fix = problem
        change = Change(
            ref=ref,
            stage="operator",
            action=Action.SKIPPED,
            error=f"{reason}\n  hint: {fix}",
            refused=True,
            reason=seen.text(),
            operator=seen,
        )
        if self.dry_run:
            self.changes.append(change)
            return
        raise OperatorRefused(
            f"the operator release was not changed: {reason}", where=self.where, hint=fix, change=change
        )

    async def run(self) -> list[Change]:
        desired = self.plan.operator
        if desired is None:
            await self._remove()
            return self.changes
        ref = release_ref(release=desired.release, namespace=desired.namespace)
        chart = helm.ChartRef(repository=desired.repository, name=desired.chart, version=desired.version)
        try:
            obs = await observe(h=self.h, desired=desired)
        except helm.HelmError as err:
            if not helm.forbidden(err):
                raise
            seen = ReleaseStatus(
                version="", limit=desired.driver_state_timeout, checked=datetime.datetime.now(datetime.UTC)
            )
            self._refuse(
                ref,
                (f"helm may not read release {desired.namespace}/{desired.release}: {err.what}", err.hint),
                seen=seen,
            )
            return self.changes
        running = obs.release.chart_version(desired.chart) if obs.release else None
        before = _summary(obs.release, obs.values, chart=desired.chart) if obs.release else None
        after = {"chart": f"{desired.repository} {desired.chart}", "version": desired.version, "values": desired.values}
        same = (
            obs.release is not None
            and obs.release.status == "deployed"
            and running == desired.version
            and obs.values == desired.values
        )
        seen = ReleaseStatus(
            version=running or "",
            limit=desired.driver_state_timeout,
            checked=datetime.datetime.now(datetime.UTC),
            drivers=tuple(await driver_states(self.client)),
        )
        states = seen.text()
        if same:
            self.changes.append(
                Change(ref=ref, stage="operator", action=Action.UNCHANGED, reason=states, operator=seen)
            )
            return self.changes
        action = Action.CONFIGURED if obs.release else Action.CREATED
        change = Change(
            ref=ref, stage="operator", action=action, before=before, after=after, reason=states, operator=seen
        )
        for check in await preflights.run(client=self.client, plan=self.plan, only=PREFLIGHT):
            if not check.ok:
                self._refuse(ref, (f"preflight check {check.name} failed: {check.detail}", check.hint), seen=seen)
                return self.changes
        for problem in (
            values_problem(desired.values),
            await self._clusterpolicy_problem(desired),
            dra_release_problem(obs.releases, desired=desired),
            version_problem(desired, running=running),
        ):
            if problem:
                self._refuse(ref, problem, seen=seen)
                return self.changes
        if running and parse_version(desired.version) < parse_version(running):
            claims = await allocated_claims(self.client)
            if claims:
                self._refuse(ref, _claims_block(claims, what="downgrading"), seen=seen)
                return self.changes
        try:
            chart_crds = await self.h.crds(chart)
        except helm.HelmError as err:
            change.error = (
                f"cannot read chart {chart}: {err.what}\n  hint: check that spec.chart.repository, name and "
                "version can be reached from here (helm show chart ...)"
            )
            self.changes.append(change)
            return self.changes
        live_crds = {
            c["metadata"]["name"]: c
            for c in await _items(self.client, api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
        }
        for problem in crd_owner_problems(chart_crds, live_crds, desired=desired):
            self._refuse(ref, problem, seen=seen)
            return self.changes
        for problem in await self._dropped(chart_crds, live_crds):
            self._refuse(ref, problem, seen=seen)
            return self.changes
        if self.dry_run:
            self.changes.append(change)
            self.changes.extend(await self._object_diff(chart, desired, chart_crds, live_crds))
            return self.changes
        attributes = {
            tracing.KIND: ref.kind,
            tracing.NAMESPACE: ref.namespace,
            tracing.NAME: ref.name,
            tracing.ACTION: str(change.action),
            tracing.FIELD_MANAGER: "helm",
        }
        with tracing.tracer().start_as_current_span("apply object", attributes=attributes) as span:
            started = time.monotonic()
            await self._apply_crds(chart_crds)
            self.changes.append(change)
            try:
                await self.h.upgrade(chart, release=desired.release, namespace=desired.namespace, values=desired.values)
            except helm.HelmError as err:
                change.error = str(err)
                span.set_attribute("error.type", type(err).__name__)
                await self._roll_back(desired, change)
                return self.changes
            finally:
                change.duration = time.monotonic() - started
        change.operator = dataclasses.replace(seen, version=desired.version)
        self.changed = True
        return self.changes

    async def _clusterpolicy_problem(self, desired: OperatorRelease) -> tuple[str, str] | None:
        policies = await _items(self.client, api_version=CLUSTERPOLICY_API, kind="ClusterPolicy")
        if not policies:
            return None
        names = ", ".join(sorted(p["metadata"]["name"] for p in policies))
        return (
            f"ClusterPolicy {names} exists and installPath {desired.install_path} uses GPUCluster: the guide's "
            "GPUCluster path is a new installation, not an in-place conversion, and both allocation paths must "
            "never run together",
            "install on a cluster without a ClusterPolicy (or remove the ClusterPolicy and its device-plugin "
            "workloads first: kubectl get clusterpolicy)",
        )

    async def _dropped(
        self, chart_crds: list[dict[str, Any]], live: dict[str, dict[str, Any]]
    ) -> list[tuple[str, str]]:
        out = []
        for crd in chart_crds:
            old = live.get(crd["metadata"]["name"])
            if old is None:
                continue
            for version, paths in dropped_fields(old, crd).items():
                group = crd["spec"]["group"]
                objects = await _items(self.client, api_version=f"{group}/{version}", kind=crd["spec"]["names"]["kind"])
                for path in paths:
                    users = sorted(
                        "/".join(filter(None, (o["metadata"].get("namespace"), o["metadata"]["name"])))
                        for o in objects
                        if uses(o, path)
                    )
                    if users:
                        out.append(
                            (
                                f"the chart's CRD {crd['metadata']['name']} drops field {path} ({version}), which "
                                f"stored objects use: {', '.join(users[:10])}",
                                "remove the field from those objects first, or keep the chart version that has it",
                            )
                        )
        return out

    async def _apply_crds(self, crds: list[dict[str, Any]]) -> None:
        """Server-side apply the chart's CRDs and wait until every one is Established."""
        for crd in crds:
            await self.client.apply(crd, field_manager="fleet", force=True)
        names = {c["metadata"]["name"] for c in crds}
        pending: set[str] = set(names)
        with anyio.move_on_after(self.timeout):
            while pending:
                live = await _items(self.client, api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
                pending = {
                    c["metadata"]["name"]
                    for c in live
                    if c["metadata"]["name"] in names and not _condition(c, "Established")
                } | (names - {c["metadata"]["name"] for c in live})
                if pending:
                    await anyio.sleep(0.2)
        if pending:
            raise OperatorRefused(
                f"the chart's CRDs are not Established after {self.timeout:g}s: {', '.join(sorted(pending))}",
                where=self.where,
                hint="kubectl describe crd NAME; helm was not run",
            )
        await self.client.discover()  # the new kinds (GPUCluster...) are now served

    async def _roll_back(self, desired: OperatorRelease, change: Change) -> None:
        history = await self.h.history(name=desired.release, namespace=desired.namespace)
        good = [e for e in history if e.get("status") in ("deployed", "superseded")]
        if not good or not history or history[-1].get("status") != "failed":
            return  # helm refused before writing a revision (or there is nothing to go back to)
        target = int(good[-1]["revision"])
        try:
            await self.h.rollback(name=desired.release, namespace=desired.namespace, revision=target)
            change.error += f"\n  rolled back to revision {target} (helm history)"
        except helm.HelmError as err:
            change.error += f"\n  rollback to revision {target} failed too: {err.what}"

    async def _object_diff(
        self,
        chart: helm.ChartRef,
        desired: OperatorRelease,
        chart_crds: list[dict[str, Any]],
        live_crds: dict[str, dict[str, Any]],
    ) -> list[Change]:
        """The rendered chart (CRDs first) against live objects, each through a server-side apply dry-run."""
        try:
            rendered = await self.h.render(
                chart, release=desired.release, namespace=desired.namespace, values=desired.values
            )
        except helm.HelmError as err:
            ref = release_ref(release=desired.release, namespace=desired.namespace)
            return [Change(ref=ref, stage="operator", action=Action.SKIPPED, error=f"cannot render the chart: {err}")]
        out = []
        for obj in [*chart_crds, *rendered]:
            obj.setdefault("metadata", {})
            if obj.get("kind") != "CustomResourceDefinition":
                namespaced = True
                with contextlib.suppress(NotFound):
                    namespaced = (await self.client.kind(api_version=obj["apiVersion"], kind=obj["kind"])).namespaced
                if namespaced:
                    obj["metadata"].setdefault("namespace", desired.namespace)
            ref = Ref.of(obj)
            manager = "fleet" if obj.get("kind") == "CustomResourceDefinition" else "helm"
            try:
                live: dict[str, Any] | None = await self.client.get(ref)
            except (NotFound, KubeError):
                live = None
            try:
                merged = await self.client.apply(obj, field_manager=manager, force=True, dry_run=True)
            except KubeError:
                merged = obj  # a kind the chart's CRDs will only add: shown as written
            before, after = normalizations.normalise(live), normalizations.normalise(merged)
            if before == after:
                continue
            out.append(
                Change(
                    ref=ref,
                    stage="operator",
                    action=Action.CONFIGURED if live else Action.CREATED,
                    before=before,
                    after=after,
                )
            )
        return out

    async def _remove(self) -> None:
        """The operator is no longer declared: uninstall fleet's release, once no claim holds a GPU."""
        try:
            from fleet.manifests.kinds import GPUOperatorSpec  # the models: only a removal needs its default

            found = await visible_releases(self.h, namespace=GPUOperatorSpec.model_fields["namespace"].default)
            mine = [r for r in found if r.chart_name == "gpu-operator"]
        except helm.HelmMissing:
            return  # no helm here: nothing fleet could have installed with it
        except helm.HelmError as err:
            if not helm.forbidden(err):
                raise
            # This identity may not read helm's release record (the in-cluster base install, without
            # overlays/gpu-operator): it could not have installed a release, and removes none.
            return
        for r in mine:
            labelled = await self.h.labels(name=r.name, namespace=r.namespace, revision=r.revision)
            if not labelled:
                continue  # not installed by fleet: never removed by fleet
            ref = release_ref(release=r.name, namespace=r.namespace)
            change = Change(
                ref=ref, stage="operator", action=Action.DELETED, before=_summary(r, {}, chart="gpu-operator")
            )
            if not self.prune:
                change.action = Action.SKIPPED
                change.reason = "no longer declared; not uninstalled (--prune not given)"
                self.changes.append(change)
                continue
            claims = await allocated_claims(self.client)
            if claims:
                reason, fix = _claims_block(claims, what="removing")
                change.action = Action.SKIPPED
                change.refused = True
                change.error = f"{reason}\n  hint: {fix}"
                self.changes.append(change)
                continue
            self.changes.append(change)
            if self.dry_run:
                continue
            try:
                await self.h.uninstall(name=r.name, namespace=r.namespace)
            except helm.HelmError as err:
                change.error = str(err)


async def pool_node_blocked(client: Client, *, node: str) -> str:
    """Why a pool may not give ``node`` back yet: claims hold its GPUs ("" when free)."""
    claims = await allocated_claims(client, node=node)
    if not claims:
        return ""
    reason, fix = _claims_block(claims, what=f"removing pool node {node} from its pool")
    return f"{reason}\n  hint: {fix}"


def _claims_block(claims: list[str], *, what: str) -> tuple[str, str]:
    shown = ", ".join(claims[:20]) + (f", ... and {len(claims) - 20} more" if len(claims) > 20 else "")
    return (
        f"{what} the operator is blocked while ResourceClaims hold the driver's GPUs: {shown}",
        "delete the GPU workloads and their claims first and wait until the devices are unprepared "
        "(the guide's clean-up order), then run again",
    )


def _summary(release: helm.Release | None, values: dict[str, Any], *, chart: str) -> dict[str, Any] | None:
    if release is None:
        return None
    return {
        "chart": release.chart_name,
        "version": release.chart_version(chart),
        "status": release.status,
        "values": values,
    }


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


# -- the readiness gate ------------------------------------------------------------------------


async def ready_problems(*, client: Client, plan: Plan) -> list[str]:
    """What keeps the operator from being ready: GPUCluster, kubelet plugin, DeviceClasses, slices per pool."""
    desired = plan.operator
    if desired is None:
        return []
    problems: list[str] = []
    try:
        await client.kind(api_version=GPUCLUSTER.api_version, kind=GPUCLUSTER.kind)
        gc: dict[str, Any] | None = await client.get(GPUCLUSTER)
    except NotFound:
        await client.discover()
        gc = None
    if gc is None:
        problems.append("GPUCluster gpu-cluster: does not exist (the chart renders it when gpuCluster.deployCR)")
    else:
        status = gc.get("status") or {}
        ready = _condition(gc, "Ready")
        if status.get("state") != "ready" or ready is None:
            conds = (
                "; ".join(
                    f"{c.get('type')}={c.get('status')} {c.get('reason', '')}: {c.get('message', '')}".strip()
                    for c in status.get("conditions") or ()
                )
                or "no conditions"
            )
            events = await _events(client, kind="GPUCluster", name="gpu-cluster")
            problems.append(f"GPUCluster gpu-cluster: state {status.get('state') or 'unset'} ({conds}){events}")
    ds = await _items(
        client,
        api_version="apps/v1",
        kind="DaemonSet",
        namespace=desired.namespace,
        field_selector=f"metadata.name={KUBELET_PLUGIN}",
    )
    if not ds:
        problems.append(f"DaemonSet {desired.namespace}/{KUBELET_PLUGIN}: does not exist")
    else:
        st = ds[0].get("status") or {}
        want, have = st.get("desiredNumberScheduled", 0), st.get("numberAvailable", 0)
        if want == 0 or have < want:
            events = await _events(client, kind="DaemonSet", name=KUBELET_PLUGIN, namespace=desired.namespace)
            problems.append(f"DaemonSet {desired.namespace}/{KUBELET_PLUGIN}: {have} of {want} pods available{events}")
    classes = {
        c["metadata"]["name"] for c in await _items(client, api_version="resource.k8s.io/v1", kind="DeviceClass")
    }
    missing = [c for c in DEVICE_CLASSES if c not in classes]
    if missing:
        problems.append(f"DeviceClass {', '.join(missing)}: not installed by the driver")
    problems += await preflights.pool_inventory_problems(client=client, plan=plan)
    now = datetime.datetime.now(datetime.UTC)
    for state in await driver_states(client):
        if state.stuck(now=now, limit=desired.driver_state_timeout):
            problems.append(f"Node {state.text(now=now, limit=desired.driver_state_timeout)}")
    return problems


async def _events(client: Client, *, kind: str, name: str, namespace: str | None = None) -> str:
    items = await _items(
        client,
        api_version="v1",
        kind="Event",
        namespace=namespace,
        field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
    )
    recent = sorted(items, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")[-3:]
    if not recent:
        return ""
    return "; events: " + " | ".join(f"{e.get('reason')}: {e.get('message')}" for e in recent)


async def wait_ready(*, client: Client, plan: Plan, timeout: float) -> None:  # noqa: ASYNC109 - the gate's deadline
    """Re-check ``ready_problems`` each time a watched object changes; ``HealthTimeout`` after ``timeout``.

    One watch per kind the gate reads (GPUCluster, DaemonSet, DeviceClass, ResourceSlice)
    wakes the check, so the gate passes as soon as the last condition holds, without
    polling the API server; a check also runs every 10 s in case a watch is slow to start.
    """
    problems: list[str] = []
    send, receive = anyio.create_memory_object_stream[None](1)
    namespace = plan.operator.namespace if plan.operator else None
    watched = [
        (GPUCLUSTER.api_version, GPUCLUSTER.kind, None),
        ("apps/v1", "DaemonSet", namespace),
        ("resource.k8s.io/v1", "DeviceClass", None),
        ("resource.k8s.io/v1", "ResourceSlice", None),
    ]

    async def wake(api_version: str, kind_name: str, ns: str | None) -> None:
        try:
            kind = await client.kind(api_version=api_version, kind=kind_name)
        except NotFound:
            return  # not served yet (the CRD): the periodic check covers it
        async for event in kube_watch(client=client, kind=kind, namespace=ns):
            if event.type != "LISTED":
                with contextlib.suppress(anyio.WouldBlock):
                    send.send_nowait(None)

    with anyio.move_on_after(timeout):
        async with anyio.create_task_group() as tg:
            for api_version, kind_name, ns in watched:
                tg.start_soon(wake, api_version, kind_name, ns)
            while True:
                problems = await ready_problems(client=client, plan=plan)
                if not problems:
                    tg.cancel_scope.cancel()
                    return
                with anyio.move_on_after(10):
                    await receive.receive()
                await anyio.sleep(0.2)  # let a burst of events settle into one check
    raise healths.HealthTimeout(
        stage=stages.by_name("operator"), timeout=timeout, problems=problems, cluster=plan.cluster
    )


__all__ = [
    "UPGRADE_STATE",
    "DriverState",
    "OperatorRefused",
    "Stage",
    "allocated_claims",
    "crd_owner_problems",
    "dra_release_problem",
    "driver_states",
    "dropped_fields",
    "label_since",
    "parse_version",
    "pool_node_blocked",
    "ready_problems",
    "release_ref",
    "states_text",
    "values_problem",
    "version_problem",
    "wait_ready",
]
