"""A test repository that also declares the GPU Operator (NVIDIA's chart on the loopback repository)."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.apply.repos import Repo


@dataclass
class OperatorRepo(Repo):
    chart_repo: str = ""
    version: str | None = "v26.7.0"
    values: dict[str, Any] = field(
        default_factory=lambda: {
            "clusterPolicy": {"deployCR": False},
            "gpuCluster": {"deployCR": True},
            "driver": {"nvidiaDriverCRD": {"enabled": True}},
            "draDriver": {"computeDomains": {"enabled": False}},
        }
    )
    upgrade: dict[str, Any] = field(default_factory=dict)
    remediation: dict[str, Any] = field(default_factory=dict)

    def write(self) -> Path:
        root = super().write()
        if self.version is not None:
            (root / "operator").mkdir(exist_ok=True)
            spec = {
                "chart": {"repository": self.chart_repo, "name": "gpu-operator", "version": self.version},
                "namespace": "gpu-operator",
                "installPath": "gpuCluster",
                "values": self.values,
                **({"upgrade": self.upgrade} if self.upgrade else {}),
                **({"remediation": self.remediation} if self.remediation else {}),
            }
            doc = {
                "apiVersion": "fleet.gpufleet.dev/v1alpha1",
                "kind": "GPUOperator",
                "metadata": {"name": "gpu-operator"},
                "spec": spec,
            }
            (root / "operator" / "gpu-operator.yaml").write_text(textwrap.dedent(json.dumps(doc, indent=1)) + "\n")
        return root
