"""The Kubernetes releases the sandbox can run, and the flags that make each serve all the DRA it has.

A fleet spans clusters on several minors, so the sandbox runs any of the releases in
``versions.KUBERNETES_RELEASES`` (one per minor), ``versions.KUBERNETES`` unless
``FLEET_KUBERNETES`` or ``fleetctl sandbox up|build --kubernetes`` names another (``1.34``
or ``v1.34.4``). Each is built from its own pinned module graph (``tools/ktestenv/go.mod``
for the default, ``go<minor>.mod`` for the others) into a cache folder of its own.

The feature gates come from ``fleet.policy.featuregates.GATES``, the table ``validate`` decides
by, so the sandbox and the rule cannot disagree: every DRA gate that exists in the minor and is
off by default there is turned on, unless a gate it depends on cannot be (a gate absent in a
minor is never passed: the components refuse to start with an unknown gate; a gate on by
default, locked or not, is left alone). The same list goes to kube-apiserver, kube-scheduler
and kube-controller-manager. ``--runtime-config`` serves the APIs those gates need that are
off by default: DeviceTaintRule's version for the minor (``featuregates.TAINT_RULE_APIS``,
``v1alpha3`` on 1.34 and 1.35, ``v1beta2`` on 1.36; 1.37 serves it in ``resource.k8s.io/v1``)
and, with DRAResourcePoolStatus, ``v1alpha3`` ResourcePoolStatusRequests, which
kube-controller-manager's resourcepoolstatusrequest controller watches. With DRADeviceTaints on
and DeviceTaintRule served, its device-taint-eviction-controller runs on every minor.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from fleet.policy import featuregates
from fleet.sandbox import versions
from fleet.sandbox.errors import SandboxError

ENV = "FLEET_KUBERNETES"
SERVED_BY_DEFAULT = frozenset({"resource.k8s.io/v1"})
"""DRA API versions every supported minor serves without ``--runtime-config``."""
GATE_APIS = {"DRAResourcePoolStatus": "resource.k8s.io/v1alpha3/resourcepoolstatusrequests"}
"""APIs off by default that a gate's controllers watch, to serve where the gate is on."""


@dataclass(frozen=True)
class Release:
    """One selectable Kubernetes release: ``v1.34.4``."""

    version: str

    @property
    def name(self) -> str:
        """``1.34``: the minor as ``FLEET_KUBERNETES`` and ``--kubernetes`` take it."""
        return ".".join(self.version.removeprefix("v").split(".")[:2])

    @property
    def minor(self) -> int:
        return featuregates.minor_of(self.version)

    @property
    def default(self) -> bool:
        return self.version == versions.KUBERNETES

    @property
    def modfile(self) -> str:
        """The module file in ``tools/ktestenv`` that pins this release's graph."""
        return "go.mod" if self.default else f"go{self.name}.mod"

    @property
    def feature_gates(self) -> tuple[str, ...]:
        """The DRA gates turned on (sorted): off by default in this minor and able to be on."""
        wanted = {
            name: True
            for name, gate in featuregates.GATES.items()
            if name.startswith("DRA")  # the table also knows ResourceHealthStatus and what DRA gates need
            and (spec := gate.spec(self.minor)) is not None
            and not spec.default
            and not spec.locked
        }
        on = featuregates.effective(self.minor, wanted)
        return tuple(sorted(name for name in wanted if name in on))

    @property
    def runtime_config(self) -> tuple[str, ...]:
        """``--runtime-config`` entries (``group/version[/resource]``) beyond what the minor serves by default."""
        apis = list(featuregates.TAINT_RULE_APIS.get(self.minor, ())[:1])
        apis += [api for gate, api in GATE_APIS.items() if gate in self.feature_gates]
        return tuple(api for api in apis if api not in SERVED_BY_DEFAULT)

    def flags(self) -> list[str]:
        """``--feature-gates`` for every Kubernetes component (none when no gate is turned on)."""
        gates = ",".join(f"{gate}=true" for gate in self.feature_gates)
        return [f"--feature-gates={gates}"] if gates else []

    def apiserver_flags(self) -> list[str]:
        """kube-apiserver's: the gates and ``--runtime-config``."""
        config = ",".join(f"{api}=true" for api in self.runtime_config)
        return [*self.flags(), *([f"--runtime-config={config}"] if config else [])]


ALL = tuple(Release(version) for version in versions.KUBERNETES_RELEASES.values())
"""Every selectable release, oldest first."""
DEFAULT = Release(versions.KUBERNETES)


def select(wanted: str | None = None, *, where: str = "--kubernetes") -> Release:
    """The release ``wanted`` names (``1.34``, ``v1.34``, ``v1.34.4``), else ``$FLEET_KUBERNETES``'s, else
    the default; a name that is not selectable is an error listing those that are."""
    if not wanted:
        wanted, where = os.environ.get(ENV, ""), ENV
    if not wanted:
        return DEFAULT
    text = wanted.strip().removeprefix("v")
    for release in ALL:
        if text in (release.name, release.version.removeprefix("v")):
            return release
    choices = ", ".join(f"{r.name} ({r.version}{', the default' if r.default else ''})" for r in ALL)
    raise SandboxError(
        f"Kubernetes {wanted!r} is not a release the sandbox can run",
        where=where,
        hint=f"choose one of {choices}",
    )


__all__ = ["ALL", "DEFAULT", "ENV", "GATE_APIS", "SERVED_BY_DEFAULT", "Release", "select"]
