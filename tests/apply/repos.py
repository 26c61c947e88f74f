"""A small fleet repository per test, with names unique to the test.

Each test gets its own cluster name (so its own ledger), team
namespaces and DeviceClass name, so tests sharing the one sandbox never see
each other's objects.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Team:
    namespaces: list[str]
    group: str
    quota: int | None
    drift: str | None = None
    adopt: bool | list[str] = False
    """``spec.adoptNamespaces``: adopt namespaces that exist before fleet (all, or these)."""


@dataclass
class Repo:
    root: Path
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    teams: dict[str, Team] = field(default_factory=dict)
    claims: dict[str, str] = field(default_factory=dict)
    """team/file name → ResourceClaimTemplate YAML."""
    pools: dict[str, str] = field(default_factory=dict)
    device_class_expression: str = "device.driver == 'gpu.nvidia.com'"
    device_class: bool = True
    files: dict[str, str] = field(default_factory=dict)
    """Further files, path → YAML (written as they are, after the generated ones)."""
    cluster_spec: dict[str, Any] = field(default_factory=dict)
    """More fields of the Cluster's spec (``maintenance``, ``disruption``...)."""
    kubernetes: str = "1.36"
    """The Cluster's ``spec.kubernetesVersion``."""

    @property
    def cluster(self) -> str:
        return f"t-{self.id}"

    @property
    def device_class_name(self) -> str:
        return f"t-{self.id}.gpu.example.com"

    def ns(self, name: str) -> str:
        return f"{name}-{self.id}"

    def team(
        self,
        name: str,
        *,
        namespaces: list[str],
        group: str,
        quota: int | None = 4,
        drift: str | None = None,
        adopt: bool | list[str] = False,
    ) -> None:
        adopted = adopt if isinstance(adopt, bool) else [self.ns(n) for n in adopt]
        self.teams[name] = Team(
            namespaces=[self.ns(n) for n in namespaces], group=group, quota=quota, drift=drift, adopt=adopted
        )

    def claim_template(
        self, team: str, name: str, *, count: int = 1, namespace: str | None = None, adopt: bool = False
    ) -> None:
        ns = self.teams[team].namespaces[0] if namespace is None else namespace
        annotations = '\n              annotations: {fleet.gpufleet.dev/adopt: "true"}' if adopt else ""
        self.claims[f"{team}/{name}"] = f"""\
            apiVersion: resource.k8s.io/v1
            kind: ResourceClaimTemplate
            metadata:
              name: {name}
              namespace: {ns}{annotations}
            spec:
              spec:
                devices:
                  requests:
                  - name: gpu
                    exactly:
                      deviceClassName: {self.device_class_name}
                      count: {count}
            """

    def claim(self, team: str, name: str, *, count: int = 1) -> None:
        """A ResourceClaim (not a template) in the team's first namespace."""
        self.claims[f"{team}/{name}"] = f"""\
            apiVersion: resource.k8s.io/v1
            kind: ResourceClaim
            metadata:
              name: {name}
              namespace: {self.teams[team].namespaces[0]}
            spec:
              devices:
                requests:
                - name: gpu
                  exactly:
                    deviceClassName: {self.device_class_name}
                    count: {count}
            """

    def pool(
        self,
        name: str,
        *,
        selector: dict[str, str],
        labels: dict[str, str],
        taints: str = "[]",
        nodes: int = 1,
        gpus: int = 8,
        product: str = "NVIDIA H100 80GB HBM3",
    ) -> None:
        # values quoted: a label value such as a Repo's id (``992619``, ``12e456``) is a string, not a number
        sel = "".join(f"\n                {k}: {json.dumps(v)}" for k, v in selector.items())
        lab = "".join(f"\n                {k}: {json.dumps(v)}" for k, v in labels.items())
        self.pools[name] = f"""\
            apiVersion: fleet.gpufleet.dev/v1alpha1
            kind: GPUNodePool
            metadata:
              name: {name}
            spec:
              nodeSelector:{sel}
              labels:{lab}
              taints: {taints}
              gpu:
                productName: {product}
                count: {gpus}
              nodes: {nodes}
            """

    def write(self) -> Path:
        if self.root.exists():
            for path in sorted(self.root.rglob("*.yaml"), reverse=True):
                path.unlink()
        files = {
            "fleet.yaml": f"""\
                apiVersion: fleet.gpufleet.dev/v1alpha1
                kind: Fleet
                metadata:
                  name: test
                spec:
                  clusters: [{self.cluster}]
                """,
            f"clusters/{self.cluster}.yaml": textwrap.dedent(f"""\
                apiVersion: fleet.gpufleet.dev/v1alpha1
                kind: Cluster
                metadata:
                  name: {self.cluster}
                spec:
                  kubernetesVersion: "{self.kubernetes}"
                """)
            + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in self.cluster_spec.items()),
        }
        if self.device_class:
            files[f"deviceclasses/{self.device_class_name}.yaml"] = f"""\
                apiVersion: resource.k8s.io/v1
                kind: DeviceClass
                metadata:
                  name: {self.device_class_name}
                spec:
                  selectors:
                  - cel:
                      expression: "{self.device_class_expression}"
                """
        for name, team in self.teams.items():
            quota = (
                f"\n                  quota:\n                    {self.device_class_name}: {team.quota}"
                if team.quota is not None
                else ""
            )
            if team.drift:
                quota += f"\n                  driftPolicy: {team.drift}"
            if team.adopt:
                adopt = "true" if team.adopt is True else f"[{', '.join(team.adopt)}]"
                quota += f"\n                  adoptNamespaces: {adopt}"
            files[f"teams/{name}/team.yaml"] = f"""\
                apiVersion: fleet.gpufleet.dev/v1alpha1
                kind: Team
                metadata:
                  name: {name}
                spec:
                  namespaces: [{", ".join(team.namespaces)}]
                  owners:
                  - kind: Group
                    name: {team.group}
                  deviceClasses: [{self.device_class_name}]{quota}
                """
        for key, text in self.claims.items():
            files[f"teams/{key}.yaml"] = text
        for name, text in self.pools.items():
            files[f"pools/{name}.yaml"] = text
        files.update(self.files)
        for rel, text in files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
        return self.root
