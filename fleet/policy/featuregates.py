"""Which DRA fields a cluster keeps: Kubernetes feature gates per minor version, as findings.

The API server does not refuse a field whose feature gate is off: it drops it
and stores the rest (``dropDisabledFields`` in each resource's strategy). A
template with ``tolerations`` applied to a 1.35 cluster with default gates
loses them without an error, and its pods land on tainted GPUs; a DeviceClass's
``extendedResourceName`` vanishes and pods asking ``nvidia.com/gpu`` stay
Pending. A fleet spans clusters on different minors, so ``validate`` decides
per cluster, from ``Cluster.spec.kubernetesVersion`` and ``spec.featureGates``
(or, with ``--context``, from what the cluster is seen to keep:
``fleet.policy.gateprobes``, sent by ``fleet.engine.probes``), and refuses every field whose gate is off there
(rule ``feature-gate``), naming the gate, the cluster and the first minor where
the gate is on by default.

The tables are data, read from Kubernetes v1.37.2 (which keeps every gate's
history): ``GATES`` from ``pkg/features/kube_features.go`` (versioned specs and
``defaultKubernetesFeatureGateDependencies``), ``FIELDS`` from the
``+featureGate=`` markers of ``staging/src/k8s.io/api/resource/v1/types.go``
(and ``core/v1``'s for the kubelet's device health in pod status),
and DeviceTaintRule's API versions from ``pkg/registry/resource/rest`` and
``pkg/scheduler/scheduler.go`` (1.36 reads the rules through ``v1beta2``, an
API the server does not serve by default; 1.37 through ``v1``, which it does).
``docs/repo-format.md`` prints them.

Pure: plain data in, findings out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from fleet.manifests import Finding, Location, Manifest, Path, kinds, resources
from fleet.policy import walks

MINORS = (34, 35, 36, 37)
"""The Kubernetes minors the table knows (``resource.k8s.io/v1`` is GA from 1.34)."""
RULE = "feature-gate"

Stage = Literal["alpha", "beta", "GA"]


class Spec(NamedTuple):
    """A gate in one minor: maturity, default, and whether the default can be changed."""

    stage: Stage
    default: bool
    locked: bool = False


@dataclass(frozen=True)
class Gate:
    name: str
    specs: Mapping[int, Spec]
    """Per minor; a minor missing here has no such gate (setting it stops the components)."""
    depends: tuple[str, ...] = ("DynamicResourceAllocation",)

    def spec(self, minor: int) -> Spec | None:
        """The gate's spec at ``minor`` (a newer minor than the table knows takes the newest)."""
        known = [m for m in self.specs if m <= minor]
        return self.specs[max(known)] if known else None

    def first_default_on(self) -> int | None:
        """The first minor in the table where the gate is on by default."""
        return next((m for m in sorted(self.specs) if self.specs[m].default), None)


def _gate(name: str, *stages: tuple[int, Stage, bool, bool], depends: tuple[str, ...] | None = None) -> Gate:
    specs = {minor: Spec(stage, default, locked) for minor, stage, default, locked in stages}
    return Gate(name=name, specs=specs, depends=("DynamicResourceAllocation",) if depends is None else depends)


_DRA = ("DynamicResourceAllocation",)
GATES: dict[str, Gate] = {
    g.name: g
    for g in (
        _gate(
            "DynamicResourceAllocation",
            (34, "GA", True, False),
            (35, "GA", True, True),
            (36, "GA", True, True),
            (37, "GA", True, True),
            depends=(),
        ),
        _gate(
            "DRAPrioritizedList",
            (34, "beta", True, False),
            (35, "beta", True, False),
            (36, "GA", True, False),
            (37, "GA", True, True),
        ),
        _gate(
            "DRAAdminAccess",
            (34, "beta", True, False),
            (35, "beta", True, False),
            (36, "GA", True, True),
            (37, "GA", True, True),
        ),
        _gate(
            "DRADeviceTaints",
            (34, "alpha", False, False),
            (35, "alpha", False, False),
            (36, "beta", True, False),
            (37, "GA", True, False),
        ),
        _gate(
            "DRADeviceTaintRules",
            (35, "alpha", False, False),
            (36, "beta", False, False),
            (37, "GA", True, False),
            depends=("DRADeviceTaints",),
        ),
        _gate(
            "DRAPartitionableDevices",
            (34, "alpha", False, False),
            (35, "alpha", False, False),
            (36, "beta", True, False),
            (37, "beta", True, False),
        ),
        _gate(
            "DRAConsumableCapacity",
            (34, "alpha", False, False),
            (35, "alpha", False, False),
            (36, "beta", True, False),
            (37, "beta", True, False),
        ),
        _gate(
            "DRAResourceClaimDeviceStatus",
            (34, "beta", True, False),
            (35, "beta", True, False),
            (36, "beta", True, False),
            (37, "GA", True, True),
            depends=(),
        ),
        _gate(
            "DRADeviceBindingConditions",
            (34, "alpha", False, False),
            (35, "alpha", False, False),
            (36, "beta", True, False),
            (37, "beta", True, False),
            depends=(*_DRA, "DRAResourceClaimDeviceStatus"),
        ),
        _gate(
            "DRAExtendedResource",
            (34, "alpha", False, False),
            (35, "alpha", False, False),
            (36, "beta", True, False),
            (37, "GA", True, True),
        ),
        _gate(
            "DRASchedulerFilterTimeout",
            (34, "beta", True, False),
            (35, "beta", True, False),
            (36, "beta", True, False),
            (37, "beta", True, False),
        ),
        _gate(
            "DRAResourceClaimGranularStatusAuthorization",
            (36, "beta", True, False),
            (37, "beta", True, False),
            depends=(*_DRA, "DRAResourceClaimDeviceStatus"),
        ),
        _gate("DRAListTypeAttributes", (36, "alpha", False, False), (37, "alpha", False, False)),
        _gate("DRANodeAllocatableResources", (36, "alpha", False, False), (37, "alpha", False, False)),
        _gate("DRAResourcePoolStatus", (36, "alpha", False, False), (37, "alpha", False, False)),
        _gate(
            "DRAWorkloadResourceClaims",
            (36, "alpha", False, False),
            (37, "beta", False, False),
            depends=(*_DRA, "GenericWorkload"),
        ),
        _gate("DRADerivedAttributes", (37, "alpha", False, False)),
        _gate(
            "DRADeviceCompatibilityGroups",
            (37, "alpha", False, False),
            depends=(*_DRA, "DRAPartitionableDevices"),
        ),
        # On by default only with --min-compatibility-version=1.37 (a 1.37 control plane defaults to 1.36).
        _gate("DRAFractionalCapacityRange", (37, "beta", False, False), depends=("DRAConsumableCapacity",)),
        _gate(
            "DRAOptionalNodeOperations",
            (37, "alpha", False, False),
            depends=(*_DRA, "NodeDeclaredFeatures"),
        ),
        _gate(
            "DRAPartitionableDevicesType",
            (37, "alpha", False, False),
            depends=(*_DRA, "DRAPartitionableDevices", "DRAResourcePoolStatus"),
        ),
        _gate(
            "ResourceHealthStatus",
            (34, "alpha", False, False),
            (35, "alpha", False, False),
            (36, "beta", True, False),
            (37, "beta", True, False),
        ),
        _gate(
            "ResourceHealthStatusMessage",
            (36, "beta", True, False),
            (37, "beta", True, False),
            depends=("ResourceHealthStatus",),
        ),
        # Not DRA gates: what DRA gates depend on.
        _gate(
            "GenericWorkload",
            (35, "alpha", False, False),
            (36, "alpha", False, False),
            (37, "beta", False, False),
            depends=(),
        ),
        _gate(
            "NodeDeclaredFeatures",
            (35, "alpha", False, False),
            (36, "beta", True, False),
            (37, "GA", True, True),
            depends=(),
        ),
    )
}
"""The DRA gates of ``pkg/features/kube_features.go`` (Kubernetes v1.37.2), minors 1.34 to 1.37, with
KEP-4680's ResourceHealthStatus (device health in pod status) and the two other gates DRA gates
depend on."""


class GuardedField(NamedTuple):
    """A field the API server drops (or a kind it does not serve) unless ``gate`` is on."""

    kinds: tuple[str, ...]
    field: str
    """As ``docs/repo-format.md`` shows it."""
    gate: str


_CLAIMS = ("ResourceClaim", "ResourceClaimTemplate")
FIELDS: tuple[GuardedField, ...] = (
    GuardedField(_CLAIMS, "requests[].firstAvailable", "DRAPrioritizedList"),
    GuardedField(_CLAIMS, "requests[].exactly.adminAccess", "DRAAdminAccess"),
    GuardedField(("Team",), "spec.adminAccess (the namespace label)", "DRAAdminAccess"),
    GuardedField(_CLAIMS, "requests[].exactly.tolerations, firstAvailable[].tolerations", "DRADeviceTaints"),
    GuardedField(_CLAIMS, "requests[].exactly.capacity, firstAvailable[].capacity", "DRAConsumableCapacity"),
    GuardedField(_CLAIMS, "constraints[].distinctAttribute", "DRAConsumableCapacity"),
    GuardedField(
        _CLAIMS, "requests[].exactly.derivedAttributes, firstAvailable[].derivedAttributes", "DRADerivedAttributes"
    ),
    GuardedField(("DeviceClass",), "spec.extendedResourceName", "DRAExtendedResource"),
    GuardedField(("DeviceTaintRule",), "the kind (1.34: DRADeviceTaints)", "DRADeviceTaintRules"),
    GuardedField(("ResourceSlice",), "spec.sharedCounters, devices[].consumesCounters", "DRAPartitionableDevices"),
    GuardedField(
        ("ResourceSlice",),
        "spec.perDeviceNodeSelection, devices[].nodeName/nodeSelector/allNodes",
        "DRAPartitionableDevices",
    ),
    GuardedField(("ResourceSlice",), "devices[].taints", "DRADeviceTaints"),
    GuardedField(
        ("ResourceSlice",), "devices[].allowMultipleAllocations, capacity.*.requestPolicy", "DRAConsumableCapacity"
    ),
    GuardedField(
        ("ResourceSlice",),
        "capacity.*.requestPolicy.validRange in milli-units (fractional min, max, step)",
        "DRAFractionalCapacityRange",
    ),
    GuardedField(
        ("ResourceSlice",),
        "devices[].bindsToNode, bindingConditions, bindingFailureConditions",
        "DRADeviceBindingConditions",
    ),
    GuardedField(("ResourceSlice",), "attributes.*.ints/bools/strings/versions", "DRAListTypeAttributes"),
    GuardedField(
        ("ResourceSlice",),
        "devices[].nodeAllocatableResources (1.36: nodeAllocatableResourceMappings)",
        "DRANodeAllocatableResources",
    ),
    GuardedField(
        ("ResourceSlice",), "devices[].consumesCounters[].compatibilityGroups", "DRADeviceCompatibilityGroups"
    ),
    GuardedField(("ResourceSlice",), "spec.partitionTypeAttribute", "DRAPartitionableDevicesType"),
    GuardedField(("ResourceSlice",), "spec.skipNodeOperations", "DRAOptionalNodeOperations"),
    GuardedField(
        ("ResourceClaim",), "status.devices (a driver's conditions, data, networkData)", "DRAResourceClaimDeviceStatus"
    ),
    GuardedField(
        ("Pod",), "status.containerStatuses[].allocatedResourcesStatus (device health)", "ResourceHealthStatus"
    ),
)
"""Fields behind a gate (``+featureGate=`` in ``k8s.io/api/resource/v1/types.go`` and, for the pod's
device health, ``core/v1/types.go``; v0.37.2). DRAFractionalCapacityRange has no marker: the
scheduler rounds a fractional ``validRange`` in whole units without it."""

TAINT_RULE_APIS: dict[int, tuple[str, ...]] = {
    34: ("resource.k8s.io/v1alpha3",),
    35: ("resource.k8s.io/v1alpha3",),
    36: ("resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3"),
    37: ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3"),
}
"""The API versions that have DeviceTaintRule, per minor; the first is the one the scheduler reads.
Only ``resource.k8s.io/v1`` is served by default (1.37); the others need
``--runtime-config=resource.k8s.io/<version>=true``."""

DEFAULT_APIS = frozenset({"resource.k8s.io/v1"})
"""The resource.k8s.io API version every minor of the table serves without ``--runtime-config``."""


MAINTENANCE_MINOR = 35
"""The first minor whose DeviceTaintRule has the ``None`` effect and the eviction preview in its status."""


def maintenance_api(features: ClusterFeatures | None) -> str:
    """The DeviceTaintRule API a GPUMaintenance is carried out through on a cluster ("" where it has none):
    ``resource.k8s.io/v1`` from 1.37 (GA, served by default); on 1.36 ``v1beta2`` and on 1.35 ``v1alpha3``
    when the cluster serves it (``--runtime-config``) with DRADeviceTaintRules on; 1.34's ``v1alpha3``
    has no ``None`` effect and no status to preview an eviction in."""
    if features is None or features.minor < MAINTENANCE_MINOR:
        return ""
    api = TAINT_RULE_APIS[min(features.minor, MINORS[-1])][0]  # the version the scheduler reads
    if api in DEFAULT_APIS:
        return api
    return api if api in features.apis and features.on(taint_rule_gate(features.minor)) else ""


def taint_rule_gate(minor: int) -> str:
    """1.34 has no DRADeviceTaintRules: its DeviceTaintRules come with DRADeviceTaints."""
    return "DRADeviceTaints" if minor < 35 else "DRADeviceTaintRules"


@dataclass(frozen=True)
class ClusterFeatures:
    """What one cluster runs: its minor, its effective DRA gates and the extra API versions it serves."""

    cluster: str
    file: str
    """The Cluster's file, for hints."""
    minor: int
    enabled: frozenset[str]
    apis: frozenset[str] = frozenset()
    """API versions served beyond the default ones (``spec.apiVersions``, or discovery)."""
    source: str = "declared"
    """``declared`` (kubernetesVersion, featureGates) or ``live context CTX``."""
    explicit: Mapping[str, bool] = field(default_factory=dict)
    """Gates the Cluster sets in ``spec.featureGates``."""
    declared_minor: int | None = None
    """The minor the Cluster declares, when ``minor`` was read from the live cluster."""

    def on(self, gate: str) -> bool:
        return gate in self.enabled

    @property
    def version(self) -> str:
        return f"1.{self.minor}"


def minor_of(version: str) -> int:
    """``"1.35"`` (or ``v1.35.2``, ``1.36.3-gke.1``) → 35."""
    parts = version.lstrip("v").split(".")
    digits = "".join(c for c in (parts[1] if len(parts) > 1 else "") if c.isdigit())
    return int(digits) if digits else 0


def effective(minor: int, explicit: Mapping[str, bool]) -> frozenset[str]:
    """The gates on at ``minor`` with ``explicit`` overrides; a gate whose dependency is off is off."""
    wanted = {}
    for name, gate in GATES.items():
        spec = gate.spec(minor)
        if spec is None:
            continue
        wanted[name] = spec.default if spec.locked else explicit.get(name, spec.default)
    on: set[str] = set()
    for name in sorted(wanted, key=lambda n: len(_closure(n))):
        if wanted[name] and all(d in on for d in GATES[name].depends):
            on.add(name)
    return frozenset(on)


def _closure(name: str) -> set[str]:
    found: set[str] = set()
    stack = list(GATES[name].depends)
    while stack:
        dep = stack.pop()
        if dep not in found and dep in GATES:
            found.add(dep)
            stack.extend(GATES[dep].depends)
    return found


def declared(cluster: Manifest) -> ClusterFeatures | None:
    """A Cluster's features as its manifest declares them (None if the manifest did not load)."""
    model = cluster.model
    if not isinstance(model, kinds.Cluster):
        return None
    minor = minor_of(model.spec.kubernetes_version)
    explicit = dict(model.spec.feature_gates)
    return ClusterFeatures(
        cluster=cluster.name,
        file=cluster.file,
        minor=minor,
        enabled=effective(minor, explicit),
        apis=frozenset(model.spec.api_versions),
        explicit=explicit,
    )


def check(manifests: Sequence[Manifest], *, features: ClusterFeatures | None) -> Iterator[Finding]:
    """``feature-gate`` findings for the objects one cluster gets (none without known features)."""
    if features is None or features.minor < MINORS[0]:
        return  # no resource.k8s.io/v1 at all: the cluster-version rule says so
    off = {g for g in GATES if not features.on(g)}
    for manifest in manifests:
        if isinstance(manifest.model, kinds.Cluster) and manifest.name == features.cluster:
            yield from _configuration(manifest, features=features)
        if manifest.kind == "DeviceTaintRule":
            yield from _taint_rule(manifest, features=features)
            continue
        for gate, path, what in uses(manifest):
            if gate in off:
                yield _dropped(manifest, gate=gate, path=path, what=what, features=features)


def uses(manifest: Manifest) -> list[tuple[str, Path, str]]:
    """``(gate, path, what)`` for every gated field ``manifest`` sets, computed once per manifest."""
    found: list[tuple[str, Path, str]] | None = manifest.memo.get("featuregates")
    if found is None:
        found = manifest.memo["featuregates"] = list(_uses(manifest))
    return found


def _uses(manifest: Manifest) -> Iterator[tuple[str, Path, str]]:
    model = manifest.model
    if isinstance(model, resources.DeviceClass):
        if model.spec.extended_resource_name is not None:
            yield "DRAExtendedResource", ("spec", "extendedResourceName"), "extendedResourceName"
        return
    if isinstance(model, kinds.Team):
        if model.spec.admin_access:
            yield "DRAAdminAccess", ("spec", "adminAccess"), "adminAccess"
        return
    if isinstance(model, resources.ResourceClaimTemplate):
        claim = model.spec.spec
    elif isinstance(model, resources.ResourceClaim):
        claim = model.spec
    else:
        return
    base = walks.devices_path(manifest)
    for index, request in enumerate(claim.devices.requests):
        if request.first_available is not None:
            yield (
                "DRAPrioritizedList",
                (*base, "requests", index, "firstAvailable"),
                f"request {request.name!r} firstAvailable",
            )
    for alt in walks.requests(manifest):
        body = alt.body
        if getattr(body, "admin_access", None) is not None:
            yield "DRAAdminAccess", (*alt.path, "adminAccess"), f"request {alt.name!r} adminAccess"
        if body.tolerations:
            yield "DRADeviceTaints", (*alt.path, "tolerations"), f"request {alt.name!r} tolerations"
        if body.capacity is not None:
            yield "DRAConsumableCapacity", (*alt.path, "capacity"), f"request {alt.name!r} capacity"
        if body.derived_attributes:
            yield "DRADerivedAttributes", (*alt.path, "derivedAttributes"), f"request {alt.name!r} derivedAttributes"
    for index, constraint in enumerate(claim.devices.constraints):
        if constraint.distinct_attribute is not None:
            path = (*base, "constraints", index, "distinctAttribute")
            yield "DRAConsumableCapacity", path, "distinctAttribute"


def _where(features: ClusterFeatures) -> str:
    return f"cluster {features.cluster} (Kubernetes {features.version})"


def _why_off(gate: str, *, features: ClusterFeatures) -> str:
    """Why ``gate`` is off on the cluster, and when it is on by default."""
    spec = GATES[gate].spec(features.minor)
    first = GATES[gate].first_default_on()
    since = (
        f"on by default from 1.{first}"
        if first is not None
        else f"not on by default in any minor through 1.{MINORS[-1]}"
    )
    if spec is None:
        return f"{gate} does not exist in {features.version} ({since})"
    missing = [d for d in GATES[gate].depends if not features.on(d)]
    if missing and (features.explicit.get(gate) or spec.default):
        return f"{gate} needs {', '.join(missing)}, which is off there ({gate} is {since})"
    if features.source != "declared":
        return f"{gate} is off there, as seen on the {features.source} ({since})"
    if gate in features.explicit:
        return f"{gate} is off there (spec.featureGates; {since})"
    return f"{gate} is {spec.stage} and off by default in {features.version} ({since})"


def _hint(gate: str, *, features: ClusterFeatures) -> str:
    first = GATES[gate].first_default_on()
    enable = (
        f"if its kube-apiserver, kube-scheduler and kube-controller-manager run with "
        f"--feature-gates={gate}=true, declare {gate}: true in spec.featureGates of {features.file}"
    )
    drop = "or drop the field on this cluster with an overlay (null)"
    if first is not None and first > features.minor:
        return f"upgrade {features.cluster} to 1.{first} or later; or, {enable}; {drop}"
    return f"{enable[0].upper()}{enable[1:]}; {drop}"


def _dropped(manifest: Manifest, *, gate: str, path: Path, what: str, features: ClusterFeatures) -> Finding:
    return Finding(
        manifest.positions.at(path),
        RULE,
        f"{what} needs feature gate {gate}: {_where(features)} drops it without an error, "
        f"because {_why_off(gate, features=features)}",
        hint=_hint(gate, features=features),
        object=manifest.ref,
    )


def _taint_rule(manifest: Manifest, *, features: ClusterFeatures) -> Iterator[Finding]:
    gate = taint_rule_gate(features.minor)
    apis = TAINT_RULE_APIS[min(max(features.minor, MINORS[0]), MINORS[-1])]
    if not features.on(gate):
        yield Finding(
            manifest.location,
            RULE,
            f"DeviceTaintRule needs feature gate {gate}: on {_where(features)} no component applies it, "
            f"because {_why_off(gate, features=features)}",
            hint=_hint(gate, features=features),
            object=manifest.ref,
        )
    if manifest.api_version not in apis:
        yield Finding(
            manifest.positions.at(("apiVersion",)),
            RULE,
            f"{_where(features)} has no DeviceTaintRule in {manifest.api_version}",
            hint=f"write apiVersion: {apis[0]}",
            object=manifest.ref,
        )
        return
    served = features.apis | DEFAULT_APIS
    seen = "discovery does not list it" if features.source != "declared" else "spec.apiVersions does not list it"
    for api in dict.fromkeys((manifest.api_version, apis[0])):
        if api in served:
            continue
        reader = "" if api == manifest.api_version else "its scheduler reads the rules through it; "
        other = f"write apiVersion: {apis[0]} (served by default), or " if apis[0] in DEFAULT_APIS else ""
        yield Finding(
            manifest.positions.at(("apiVersion",)),
            RULE,
            f"DeviceTaintRule on {_where(features)} needs {api} served ({reader}{seen}; it is off by default)",
            hint=f"{other}run kube-apiserver with --runtime-config={api}=true and add {api} to spec.apiVersions "
            f"of {features.file}",
            object=manifest.ref,
        )


def _configuration(cluster: Manifest, *, features: ClusterFeatures) -> Iterator[Finding]:
    """Gates a Cluster sets that its components would refuse, or that fleet does not know."""
    if features.declared_minor is not None and features.declared_minor != features.minor:
        yield Finding(
            cluster.positions.at(("spec", "kubernetesVersion")),
            "cluster-version",
            f"cluster {features.cluster} declares Kubernetes 1.{features.declared_minor}, "
            f"but the {features.source} runs {features.version}",
            severity="warning",
            hint=f'set kubernetesVersion: "{features.version}" in {features.file}',
            object=cluster.ref,
        )
    if features.minor > MINORS[-1]:
        yield Finding(
            cluster.positions.at(("spec", "kubernetesVersion")),
            "cluster-version",
            f"fleet's feature-gate table covers 1.{MINORS[0]} to 1.{MINORS[-1]}; "
            f"{features.version} is checked with the gates of 1.{MINORS[-1]}",
            severity="warning",
            hint="declare in spec.featureGates every DRA gate whose default changed since then",
            object=cluster.ref,
        )
    for name, value in features.explicit.items():
        where = cluster.positions.at(("spec", "featureGates", name))
        gate = GATES.get(name)
        spec = gate.spec(features.minor) if gate is not None else None
        if gate is None:
            yield Finding(
                where,
                RULE,
                f"fleet does not know feature gate {name!r}: it checks DRA gates only",
                severity="warning",
                hint=f"known gates: {', '.join(sorted(GATES))}",
                object=cluster.ref,
            )
        elif spec is None:
            yield Finding(
                where,
                RULE,
                f"{name} does not exist in Kubernetes {features.version}: the components refuse to start with it",
                hint=f"remove it, or upgrade to 1.{min(gate.specs)}",
                object=cluster.ref,
            )
        elif spec.locked and value != spec.default:
            yield Finding(
                where,
                RULE,
                f"{name} is {spec.stage} and locked {'on' if spec.default else 'off'} in {features.version}: "
                "the components refuse to start with it set otherwise",
                hint=f"remove {name} from spec.featureGates",
                object=cluster.ref,
            )
        elif value:
            for dep in gate.depends:
                if dep in GATES and not features.on(dep):
                    yield Finding(
                        where,
                        RULE,
                        f"{name} depends on {dep}, which is off in {features.version} here: "
                        "Kubernetes refuses a gate whose dependency is off",
                        hint=f"set {dep}: true as well, or remove {name}",
                        object=cluster.ref,
                    )
        else:
            yield from _dependents_on(cluster, name, where=where, features=features)


def _dependents_on(cluster: Manifest, name: str, *, where: Location, features: ClusterFeatures) -> Iterator[Finding]:
    """Gates on by default that depend on ``name``, which the Cluster turns off: the components check every
    enabled gate's dependencies (``featuregate.SetFromMap``), defaults included, and refuse to start."""
    for dependent, gate in sorted(GATES.items()):
        spec = gate.spec(features.minor)
        if name not in gate.depends or spec is None or not spec.default or dependent in features.explicit:
            continue
        yield Finding(
            where,
            RULE,
            f"{dependent} is on by default in {features.version} and depends on {name}: the components "
            f"refuse to start with {name} off and {dependent} on",
            hint=f"set {dependent}: false as well, or remove {name}",
            object=cluster.ref,
        )


__all__ = [
    "DEFAULT_APIS",
    "FIELDS",
    "GATES",
    "MAINTENANCE_MINOR",
    "MINORS",
    "RULE",
    "TAINT_RULE_APIS",
    "ClusterFeatures",
    "Gate",
    "GuardedField",
    "Spec",
    "check",
    "declared",
    "effective",
    "maintenance_api",
    "minor_of",
    "taint_rule_gate",
    "uses",
]
