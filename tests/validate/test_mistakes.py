"""What the cluster would refuse, caught by ``fleetctl validate`` with no inventory — and the cluster agrees.

Each mistake of issue 10 is written into a copy of the example repository;
``fleetctl validate`` (no ``--inventory``, no ``--context``: the GPUNodePools'
declared devices) must report the right rule at the right file, line and column.
The same template is then applied to the sandbox: the real API server refuses
what validate calls a compile-time or admission error, and the real scheduler
leaves pods Pending (FailedScheduling) for what validate predicts from the
declared devices. A correct template is the control: validate is silent and the
pod runs.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import waits
from tests.manifests.repos import EXAMPLE
from tests.sandbox import guide
from tests.validate.test_cli import fleetctl

GPU = "device.attributes['gpu.nvidia.com']"
CAP = "device.capacity['gpu.nvidia.com']"
REFUSED = "refused"  # the API server refuses the template
PENDING = "pending"  # accepted, but the scheduler never places the pod
RUNS = "runs"


@dataclass(frozen=True)
class Mistake:
    expression: str
    rule: str
    column: int
    cluster: str
    extra: str = ""
    at_line: int = 0

    def template(self, name: str, namespace: str = "ml-research") -> str:
        return (
            "apiVersion: resource.k8s.io/v1\n"
            "kind: ResourceClaimTemplate\n"
            "metadata:\n"
            f"  name: {name}\n"
            f"  namespace: {namespace}\n"
            "spec:\n"
            "  spec:\n"
            "    devices:\n"
            "      requests:\n"
            "      - name: gpu\n"
            "        exactly:\n"
            "          deviceClassName: gpu.nvidia.com\n"
            f"{self.extra}"
            "          selectors:\n"
            "          - cel:\n"
            f'              expression: "{self.expression}"\n'
        )

    @property
    def line(self) -> int:
        return self.at_line or 15 + self.extra.count("\n")


EXPR = 28  # column where a quoted expression starts in the template above (after the quote)
MISTAKES: dict[str, Mistake] = {
    "capacity-vs-int": Mistake(f"{CAP}.memory > 40", "cel", EXPR + len(f"{CAP}.memory "), REFUSED),
    "misspelt-attribute": Mistake(
        f"{GPU}.productNme == 'NVIDIA H100 80GB HBM3'", "cel-unknown-attribute", EXPR + len(f"{GPU}."), PENDING
    ),
    "version-vs-string": Mistake(f"{GPU}.driverVersion >= '580.0.0'", "cel-runtime-error", EXPR, PENDING),
    "no-pool-has-it": Mistake(f"{GPU}.productName == 'NVIDIA B200'", "claim-unsatisfiable", EXPR, PENDING),
    "admin-access": Mistake(
        f"{GPU}.productName == 'NVIDIA H200'",
        "team-admin-access",
        11,
        REFUSED,
        extra="          adminAccess: true\n",
        at_line=13,
    ),
    "control": Mistake(f"{CAP}.memory.isGreaterThan(quantity('40Gi'))", "", 0, RUNS),
}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    repo = tmp_path_factory.mktemp("mistakes") / "repo"
    shutil.copytree(EXAMPLE, repo)
    for name, mistake in MISTAKES.items():
        (repo / "teams" / "ml-research" / f"{name}.yaml").write_text(mistake.template(name))
    result = fleetctl("validate", str(repo), "-o", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in MISTAKES}
    for finding in json.loads(result.stdout)["findings"]:
        name = Path(finding["file"]).stem
        assert name in found, finding  # nothing else of the example is flagged
        found[name].append(finding)
    return found


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_validate_without_inventory_names_rule_file_line_and_column(
    name: str, verdicts: dict[str, list[dict[str, Any]]]
) -> None:
    mistake = MISTAKES[name]
    found = verdicts[name]
    if not mistake.rule:
        assert found == []
        return
    assert found, f"{name}: validate found nothing"
    first = found[0]
    assert first["file"].endswith(f"teams/ml-research/{name}.yaml")
    assert (first["rule"], first["line"], first["col"]) == (mistake.rule, mistake.line, mistake.column), found
    assert first["severity"] == "error"
    if mistake.rule.startswith(("cel-", "claim-")):
        assert "(devices: declared pools)" in first["message"]


def test_unsatisfiable_names_the_closest_values(verdicts: dict[str, list[dict[str, Any]]]) -> None:
    hint = verdicts["no-pool-has-it"][0]["hint"]
    assert "productName = 'NVIDIA H100 80GB HBM3'" in hint


def test_a_pool_of_an_unknown_model_is_a_warning_naming_the_known_ones(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    pool = repo / "pools" / "h200.yaml"
    pool.write_text(pool.read_text().replace("productName: NVIDIA H200", "productName: NVIDIA B300"))
    result = fleetctl("validate", str(repo), "-o", "json")
    assert result.returncode == 0, result.stdout
    (warning,) = json.loads(result.stdout)["findings"]
    assert (warning["rule"], warning["severity"], warning["line"]) == ("pool-unknown-model", "warning", 18)
    assert "'NVIDIA H200'" in warning["hint"] and "--inventory" in warning["hint"]


@pytest.mark.sandbox
@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_the_cluster_agrees(
    name: str, kubectl: Callable[..., Any], namespace: str, verdicts: dict[str, list[dict[str, Any]]]
) -> None:
    mistake = MISTAKES[name]
    body = yaml.safe_load(mistake.template(name, namespace=namespace))
    created = kubectl("create", "-f", "-", stdin=json.dumps(body), check=False)
    errors = [f for f in verdicts[name] if f["severity"] == "error"]
    if mistake.cluster == REFUSED:
        assert created.returncode != 0, f"{name}: the API server took what validate refuses"
        assert errors
        return
    assert created.returncode == 0, created.stderr
    kubectl("create", "-f", "-", stdin=json.dumps(guide.pod("p", template=name, namespace=namespace)))
    if mistake.cluster == RUNS:
        waits.wait_for(lambda: guide.pod_phases(kubectl, namespace).get("p") == "Running", within=120, what="Running")
        assert not errors
        return
    waits.wait_for(
        lambda: any(
            e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "p"
            for e in guide.get_json(kubectl, "events", "-n", namespace)["items"]
        ),
        within=120,
        what=f"FailedScheduling ({name})",
    )
    assert guide.pod_phases(kubectl, namespace).get("p") != "Running"
    assert errors, f"{name}: the scheduler leaves the pod Pending but validate passed it"
