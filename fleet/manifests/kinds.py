"""The fleet's own kinds (``fleet.gpufleet.dev/v1alpha1``): what the platform declares.

Shapes follow Kubernetes habits (``apiVersion``/``kind``/``metadata``/``spec``)
so the files read like the rest of a GitOps repository and editors validate
them through the generated JSON Schemas. Fields were chosen from what the DRA
guide makes an operator do by hand: install the GPU Operator on the GPUCluster
path at a pinned chart version, label and taint GPU nodes, give each team
namespaces, a group, the device classes it may use and a device quota.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from fleet.manifests import windows
from fleet.manifests.bases import ClusterSelector, Model, ObjectMeta

API_VERSION = "fleet.gpufleet.dev/v1alpha1"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
"""The namespace label without which the API server refuses ``adminAccess: true`` requests."""

DriftPolicy = Literal["enforce", "report", "ignore"]
"""What to do when the cluster changed an object git did not: ``enforce`` repairs it,
``report`` records it (status, Event, metric) and leaves it alone, ``ignore`` neither."""


class FleetDefaults(Model):
    drift_policy: DriftPolicy = "enforce"
    drift_policy_by_kind: dict[str, DriftPolicy] = Field(default_factory=dict)
    """Per kind (e.g. ``DeviceClass: report``): overrides ``driftPolicy`` for objects of that kind."""
    prune: bool = True
    """Delete objects fleet applied earlier that the repository no longer declares."""


def _checked(check: Any, value: str) -> Any:
    """``check(value)``, its WindowError turned into a model error that carries the hint."""
    try:
        return check(value)
    except windows.WindowError as exc:
        raise PydanticCustomError("fleet_value", str(exc), {"hint": exc.hint}) from exc


class Rollout(Model):
    """Rollout waves: a revision's disruptive part reaches a wave's clusters only after every cluster of
    the earlier waves applied it (commit status ``fleet/<cluster>`` = success) at least ``bake`` ago."""

    waves: list[Annotated[list[str], Field(min_length=1)]] = Field(min_length=1)
    """Cluster names per wave, in order, e.g. [[gpu-west], [gpu-east]]; each cluster in one wave at most.
    A cluster in no wave is not held by waves."""
    bake: str = "1h"
    """How long a wave's success must stand before the next wave applies (e.g. 1h, 30m)."""

    @field_validator("bake")
    @classmethod
    def _bake(cls, value: str) -> str:
        _checked(lambda v: windows.parse_duration(v, what="bake"), value)
        return value


class FleetSpec(Model):
    defaults: FleetDefaults = Field(default_factory=FleetDefaults)
    clusters: list[str] = Field(min_length=1)
    """Names of the Cluster objects (``clusters/<name>.yaml``) this fleet manages."""
    allow_empty: bool = False
    """Let the controller apply a revision that declares no object for a cluster (and so prunes
    everything fleet applied there); without it such a commit is refused and the last good one stays."""
    rollout: Rollout | None = None
    """Waves across clusters for disruptive changes (docs/change-management.md)."""


class Fleet(Model):
    """The repository root (``fleet.yaml``): defaults and the managed clusters."""

    api_version: Literal["fleet.gpufleet.dev/v1alpha1"]
    kind: Literal["Fleet"]
    metadata: ObjectMeta
    spec: FleetSpec


class MaintenanceWindow(Model):
    """When disruptive changes may be applied: from each start of ``schedule`` for ``duration``."""

    schedule: str
    """Five-field cron (minute hour day-of-month month day-of-week), read in ``timeZone``, e.g. "0 2 * * 6"."""
    duration: str
    """How long the window stays open after each start, e.g. 4h or 90m."""
    time_zone: str = "UTC"
    """The IANA time zone the schedule is read in, e.g. Europe/Berlin."""

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        return str(_checked(windows.check_schedule, value))

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str) -> str:
        _checked(windows.parse_duration, value)
        return value

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        _checked(windows.zone, value)
        return value

    def window(self) -> windows.Window:
        return windows.Window(
            schedule=self.schedule, duration=windows.parse_duration(self.duration), time_zone=self.time_zone
        )


class Maintenance(Model):
    windows: list[MaintenanceWindow] = Field(min_length=1)
    """Disruptive changes wait for the next of these windows; safe ones apply at once."""


class DisruptionPolicy(Model):
    """What a disruptive change does about the GPU jobs on the nodes it affects."""

    policy: Literal["wait", "drain", "force"] = "wait"
    """``wait`` until the affected nodes hold no allocated claim; ``drain`` them node by node (cordon,
    evict through the Eviction API, uncordon once healthy); ``force`` applies over running jobs."""
    deadline: str = "24h"
    """How long ``wait`` or ``drain`` may take before the change is reported as overdue."""
    max_unavailable: int = Field(default=1, ge=0)
    """``drain``: how many nodes may be cordoned at once."""

    @field_validator("deadline")
    @classmethod
    def _deadline(cls, value: str) -> str:
        _checked(lambda v: windows.parse_duration(v, what="deadline"), value)
        return value

    @field_validator("max_unavailable")
    @classmethod
    def _drain(cls, value: int, info: ValidationInfo) -> int:
        if info.data.get("policy") == "drain" and value < 1:
            raise PydanticCustomError(
                "fleet_value",
                "drain with maxUnavailable: 0 never drains a node",
                {"hint": "set maxUnavailable: 1 or more, or choose policy wait"},
            )
        return value


class ClusterSpec(Model):
    kubernetes_version: str = Field(pattern=r"^1\.[0-9]+$")
    """Expected Kubernetes minor version, e.g. "1.36" (quoted: 1.30 is a float)."""
    context: str | None = None
    """kubeconfig context fleetctl uses for this cluster when none is given."""
    feature_gates: dict[str, bool] = Field(default_factory=dict)
    """Kubernetes feature gates the cluster's control plane sets away from the version's defaults
    (``--feature-gates``), e.g. {"DRAExtendedResource": true}: fleet refuses DRA fields whose gate is
    off there (docs/repo-format.md has the table)."""
    api_versions: list[str] = Field(default_factory=list)
    """API versions served beyond the defaults (``--runtime-config``), e.g. ["resource.k8s.io/v1beta2"]
    for DeviceTaintRules on 1.36."""
    maintenance: Maintenance | None = None
    """Maintenance windows for disruptive changes (docs/change-management.md); without it they go at once."""
    disruption: DisruptionPolicy = Field(default_factory=DisruptionPolicy)
    """What disruptive changes do about running GPU jobs."""


class Cluster(Model):
    """One Kubernetes cluster; overlays and selectors match its metadata.labels."""

    api_version: Literal["fleet.gpufleet.dev/v1alpha1"]
    kind: Literal["Cluster"]
    metadata: ObjectMeta
    spec: ClusterSpec


class Chart(Model):
    repository: str = "https://helm.ngc.nvidia.com/nvidia"
    name: str = "gpu-operator"
    version: str = Field(pattern=r"^v?[0-9]+\.[0-9]+\.[0-9]+.*$")


class OperatorUpgrade(Model):
    allow_downgrade: bool = False
    """Allow installing a chart version older than the one running (refused otherwise)."""
    allow_major: bool = False
    """Allow an upgrade across a major chart version (refused otherwise)."""
    driver_state_timeout: int = Field(default=1800, ge=60)
    """Seconds a GPU node may stay in one driver-upgrade state before fleet reports it as stuck."""


class Remediation(Model):
    """What fleet does when helm fails an install or upgrade (as Flux's helm-controller does)."""

    strategy: Literal["rollback", "uninstall", "none"] = "rollback"
    """``rollback``: back to the last deployed revision (a failed first install is uninstalled);
    ``uninstall``: remove the release; ``none``: leave the failed release as helm left it."""
    retries: int = Field(default=0, ge=0, le=10)
    """How many more times one run tries the install or upgrade after remediating a failure."""


class GPUOperatorSpec(Model):
    chart: Chart
    namespace: str = "gpu-operator"
    install_path: Literal["gpuCluster", "preinstalledDriver"] = "gpuCluster"
    """``gpuCluster``: operator-managed driver (NVIDIADriver CR); ``preinstalledDriver``: host driver ≥580."""
    values: dict[str, Any] = Field(default_factory=dict)
    """Helm values, as ``--set`` would give them (checked against the install path)."""
    upgrade: OperatorUpgrade = Field(default_factory=OperatorUpgrade)
    """What fleet may do to a running release beyond a same-major upgrade."""
    remediation: Remediation = Field(default_factory=Remediation)
    """What fleet does when helm fails the install or upgrade."""
    release: str = "gpu-operator"
    """Helm release name."""


class GPUOperator(Model):
    """The NVIDIA GPU Operator release, on the DRA (GPUCluster) path."""

    api_version: Literal["fleet.gpufleet.dev/v1alpha1"]
    kind: Literal["GPUOperator"]
    metadata: ObjectMeta
    spec: GPUOperatorSpec


class Taint(Model):
    key: str = Field(min_length=1)
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class GPUs(Model):
    product_name: str = Field(min_length=1)
    """The driver's ``productName`` attribute, e.g. "NVIDIA H100 80GB HBM3"."""
    count: int = Field(ge=1, le=64)
    """GPUs per node."""
    memory: str | None = None
    """Expected ``memory`` capacity per GPU as the driver publishes it, e.g. "81559Mi"."""


MIGProfile = Annotated[str, StringConstraints(pattern=r"^([0-9]+c\.)?[0-9]+g\.[0-9]+gb(\+me)?$")]


class MIG(Model):
    strategy: Literal["static", "dynamic"] = "static"
    """``static``: MIG devices made beforehand (mig-parted), ``profiles`` says which. ``dynamic``: the
    NVIDIA driver's DynamicMIG gate publishes every placement of every profile as a partitionable
    device and makes the partition a claim gets (``profiles`` stays empty)."""
    profiles: dict[MIGProfile, Annotated[int, Field(ge=1, le=7)]] = Field(default_factory=dict)
    """MIG devices per GPU by profile, e.g. {"1g.10gb": 7} (static MIG)."""

    @model_validator(mode="after")
    def _profiles_go_with_the_strategy(self) -> MIG:
        if self.strategy == "static" and not self.profiles:
            raise ValueError("static MIG needs profiles (MIG devices per GPU, e.g. {1g.10gb: 7}); or strategy: dynamic")
        if self.strategy == "dynamic" and self.profiles:
            raise ValueError("dynamic MIG makes partitions on demand: leave profiles out")
        return self


class GPUNodePoolSpec(Model):
    clusters: ClusterSelector = Field(default_factory=ClusterSelector)
    node_selector: dict[str, str] = Field(min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels fleet keeps on every selected node."""
    taints: list[Taint] = Field(default_factory=list)
    """Taints fleet keeps on every selected node."""
    gpu: GPUs
    nodes: int = Field(ge=0)
    """Expected number of nodes."""
    mig: MIG | None = None


class GPUNodePool(Model):
    """A group of identical GPU nodes: how to find them and what they must carry."""

    api_version: Literal["fleet.gpufleet.dev/v1alpha1"]
    kind: Literal["GPUNodePool"]
    metadata: ObjectMeta
    spec: GPUNodePoolSpec


class Owner(Model):
    kind: Literal["Group", "User", "ServiceAccount"] = "Group"
    name: str = Field(min_length=1)
    namespace: str | None = None
    """Only for ServiceAccount (required there)."""

    @model_validator(mode="after")
    def _namespace_for_service_accounts(self) -> Owner:
        if (self.kind == "ServiceAccount") != (self.namespace is not None):
            raise ValueError("namespace is required for a ServiceAccount and only for it")
        return self


class TeamSpec(Model):
    clusters: ClusterSelector = Field(default_factory=ClusterSelector)
    namespaces: list[str] = Field(min_length=1)
    owners: list[Owner]
    """Who gets the team's Role (claims and templates only) in its namespaces. ``[]`` (what ``fleetctl
    import`` writes when it finds none) grants it to nobody but the team's ServiceAccount, as which fleet
    writes the team's objects; ``validate`` warns (``team-owners``)."""
    device_classes: list[str] = Field(min_length=1)
    """DeviceClasses the team's requests may name."""
    quota: dict[str, int] = Field(default_factory=dict)
    """Maximum devices per device class, over all the team's claims (ResourceQuota)."""
    drift_policy: DriftPolicy | None = None
    """Overrides the fleet default for the team's objects."""
    drift_policy_by_kind: dict[str, DriftPolicy] = Field(default_factory=dict)
    """Per kind, for the team's objects: overrides the team's and the fleet's policies."""
    adopt_namespaces: bool | list[str] = False
    """Namespaces that exist before fleet and that fleet may take over: ``true`` for all of
    ``namespaces``, or a list of them. Without it, an existing namespace is a conflict.
    An adopted namespace is released (fleet's labels and fields removed), never deleted."""
    admin_access: bool = False
    """May the team's requests set ``adminAccess: true`` (monitoring devices already in use)? Fleet then
    labels the team's namespaces ``resource.kubernetes.io/admin-access: "true"``, without which the API
    server refuses such requests."""

    @model_validator(mode="after")
    def _quota_non_negative(self) -> TeamSpec:
        for name, value in self.quota.items():
            if value < 0:
                raise ValueError(f"quota for {name} must be ≥ 0, got {value}")
        return self

    @model_validator(mode="after")
    def _adopts_own_namespaces(self) -> TeamSpec:
        if isinstance(self.adopt_namespaces, list):
            unknown = [n for n in self.adopt_namespaces if n not in self.namespaces]
            if unknown:
                raise ValueError(f"adoptNamespaces names {', '.join(unknown)}, not in namespaces")
        return self

    def adopted_namespaces(self) -> set[str]:
        """The namespaces fleet may adopt if they exist already."""
        if isinstance(self.adopt_namespaces, bool):
            return set(self.namespaces) if self.adopt_namespaces else set()
        return set(self.adopt_namespaces)


class Team(Model):
    """A workload team (``teams/<team>/team.yaml``) and what it may claim."""

    api_version: Literal["fleet.gpufleet.dev/v1alpha1"]
    kind: Literal["Team"]
    metadata: ObjectMeta
    spec: TeamSpec


class PatchTarget(Model):
    api_version: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)
    namespace: str | None = None


class Patch(Model):
    target: PatchTarget
    patch: dict[str, Any]
    """A JSON merge patch (RFC 7386): null deletes, mappings merge, the rest replaces."""


class OverlaySpec(Model):
    clusters: ClusterSelector
    patches: list[Patch] = Field(default_factory=list)
    values: dict[str, Any] | None = None
    """A merge patch for the GPUOperator's Helm values."""

    @model_validator(mode="after")
    def _selects_something(self) -> OverlaySpec:
        if not self.clusters.names and not self.clusters.match_labels:
            raise ValueError("clusters needs names or matchLabels (an overlay for every cluster is the base)")
        return self


class Overlay(Model):
    """Per-cluster changes, applied after the base in overlay name order."""

    api_version: Literal["fleet.gpufleet.dev/v1alpha1"]
    kind: Literal["Overlay"]
    metadata: ObjectMeta
    spec: OverlaySpec


__all__ = [
    "ADMIN_ACCESS_LABEL",
    "API_VERSION",
    "Cluster",
    "DriftPolicy",
    "Fleet",
    "GPUNodePool",
    "GPUOperator",
    "Overlay",
    "Patch",
    "PatchTarget",
    "Team",
]
