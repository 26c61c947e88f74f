"""``fleetctl import`` of a cluster as NVIDIA's DRA quickstart leaves it, on a sandbox of this module's own.

``tests/data/quickstart/cluster.yaml`` is applied with kubectl: opaque ``GpuConfig`` sharing
(time-slicing and MPS), a MIG multi-request under ``matchAttribute: gpu.nvidia.com/parentUUID``
with ``requests: []``, a count-and-capacity request, a standalone claim a pod uses (the API
server gives it its ``delete-protection`` finalizer), a Deployment whose pod uses a template (the
resourceclaim controller makes its claim), a namespace with nothing of DRA, a template on
``gpu.nvidia.com/index`` (which the real driver no longer publishes) and two RoleBindings, one
granting less than fleet's team Role. The import writes everything, names the one file validate
refuses and exits 1, and makes an owner only of the subject that already had the team Role's
rights; without the refused file, validate and diff give 0; an edit of an opaque parameter is
exactly one change, and lands.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.engine import ownership
from fleet.sandbox import Sandbox, clusters, credentials
from fleetctl import cli
from tests.conftest import Kubectl, kubectl_of
from tests.waits import wait_for

pytestmark = pytest.mark.sandbox

QUICKSTART = Path(__file__).parents[1] / "data" / "quickstart" / "cluster.yaml"
REFUSED = "teams/qs-capacity/a100.yaml"


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory, binaries_cache: Path) -> Iterator[Sandbox]:
    """A control plane of this module's own: the import reads the whole cluster."""
    directory = tmp_path_factory.mktemp("quickstart-sandbox")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLEET_CACHE_DIR", str(binaries_cache))
        sb = clusters.up(directory=directory)
    try:
        yield sb
    finally:
        clusters.down(directory=directory)


@pytest.fixture(scope="module")
def kubectl(sandbox: Sandbox) -> Kubectl:
    return kubectl_of(sandbox)


def _json(kubectl: Kubectl, *argv: str) -> Any:
    return json.loads(kubectl(*argv, "-o", "json").stdout)


@pytest.fixture()
def quickstart(kubectl: Kubectl) -> None:
    """The quickstart applied, its pods running on their claims: the standalone claim reserved (and so
    finalized by the API server), the Deployment's pod holding a claim the controller made."""
    kubectl("apply", "-f", str(QUICKSTART))

    def settled() -> bool:
        claims = _json(kubectl, "get", "resourceclaims", "-A")["items"]
        reserved = [c for c in claims if (c.get("status") or {}).get("reservedFor")]
        return len(reserved) == 2 and all(c["metadata"].get("finalizers") for c in reserved)

    wait_for(settled, what="the quickstart's two claims allocated and reserved", within=60)


def _cli(sandbox: Sandbox, helm: Path, *argv: str) -> int:
    common = ["--kubeconfig", str(sandbox.kubeconfig), "--context", credentials.CLUSTER]
    helm_flag = ["--helm", str(helm)] if argv[0] == "import" else []
    return cli.run([*argv, *common, *helm_flag])


def _rows(root: Path) -> dict[str, str]:
    """IMPORT.md's rows: first cell → the row."""
    lines = (root / "IMPORT.md").read_text().splitlines()
    return {r.split(" | ")[0].removeprefix("| "): r for r in lines if r.startswith("| ") and " | " in r}


def _managed(kubectl: Kubectl, ns: str, name: str) -> bool:
    obj = _json(kubectl, "get", "resourceclaimtemplate", name, "-n", ns)
    return bool((obj["metadata"].get("labels") or {}).get(ownership.MANAGED_BY) == ownership.MANAGER)


def _can(kubectl: Kubectl, verb: str, group: str) -> str:
    argv = ("auth", "can-i", verb, "resourceclaims.resource.k8s.io", "-n", "qs-sharing", "--as", "someone")
    return kubectl(*argv, "--as-group", group, check=False).stdout.strip()


def test_the_quickstart_imports_whole_and_names_the_one_template_validate_refuses(
    sandbox: Sandbox,
    kubectl: Kubectl,
    quickstart: None,
    helm_binary: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    cluster = f"qs-{uuid.uuid4().hex[:6]}"
    root = tmp_path / "fleet"
    code = _cli(sandbox, helm_binary, "import", str(root), "--cluster", cluster)
    out = capsys.readouterr()
    assert code == 1, out.out + out.err

    # The summary names the refused file, the finding and the attribute the driver publishes instead.
    assert "imported; 1 file needs a fix before fleet applies this repository" in out.out, out.out
    assert f"{root / REFUSED}:21:38 cel-removed-attribute attribute gpu.nvidia.com/index" in out.out, out.out
    [hint] = {line.strip() for line in out.out.splitlines() if line.strip().startswith("hint: ")}
    assert "gpu.nvidia.com/uuid" in hint and "resource.kubernetes.io/pciBusID" in hint, hint

    # Every file is written as the cluster holds it, the refused one included. The API server stores the
    # MIG constraint's `requests: []` (all requests) without the empty list.
    quick = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in yaml.safe_load_all(QUICKSTART.read_text())
        if d
    }
    constraint = quick[("ResourceClaimTemplate", "qs-mig", "mig-devices")]["spec"]["spec"]["devices"]["constraints"]
    assert constraint[0].pop("requests") == []
    for path, name in [
        ("teams/qs-sharing/multiple-gpus.yaml", ("ResourceClaimTemplate", "qs-sharing", "multiple-gpus")),
        ("teams/qs-mig/mig-devices.yaml", ("ResourceClaimTemplate", "qs-mig", "mig-devices")),
        ("teams/qs-capacity/double-gpu.yaml", ("ResourceClaimTemplate", "qs-capacity", "double-gpu")),
        (REFUSED, ("ResourceClaimTemplate", "qs-capacity", "a100")),
        ("teams/qs-claim/single-gpu-claim.yaml", ("ResourceClaim", "qs-claim", "single-gpu")),
    ]:
        written = yaml.safe_load((root / path).read_text())
        assert written["spec"] == quick[name]["spec"], path
        assert set(written["metadata"]) <= {"name", "namespace", "labels", "annotations"}, path
    assert "finalizers" not in (root / "teams/qs-claim/single-gpu-claim.yaml").read_text()
    written_claims = [p.name for p in root.rglob("*-claim.yaml")]
    assert written_claims == ["single-gpu-claim.yaml"], "the Deployment's pod's claim is not declared"
    [pool] = [yaml.safe_load(p.read_text())["spec"] for p in (root / "pools").glob("*.yaml") if "mig" in p.read_text()]
    assert pool["mig"] == {"strategy": "static", "profiles": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}

    # IMPORT.md: the refused file with its finding and hint, and a row for every kind left out.
    rows = _rows(root)
    assert "cel-removed-attribute" in rows[f"{REFUSED}:21:38"] and "pciBusID" in rows[f"{REFUSED}:21:38"]
    assert "1 Deployment(s) and 2 Pod(s) in namespace(s) qs-claim, qs-sharing" in rows["Deployments and Pods"]
    assert "no Team declares it" in rows["Namespace qs-empty"]
    assert "1 ResourceClaim(s) made for pods from templates" in rows
    assert "would grant it create, watch, update" in rows["Group claim-readers in namespace qs-sharing"]

    # The take-over adopted what validates, and left the refused template unmarked.
    assert _managed(kubectl, "qs-sharing", "multiple-gpus")
    assert not _managed(kubectl, "qs-capacity", "a100")

    # Only ml-sharing, which may do anything with resource.k8s.io there, became an owner; claim-readers,
    # which may only get and list claims, gained nothing.
    team = yaml.safe_load((root / "teams/qs-sharing/team.yaml").read_text())
    assert team["spec"]["owners"] == [{"kind": "Group", "name": "ml-sharing"}]
    assert (_can(kubectl, "create", "claim-readers"), _can(kubectl, "list", "claim-readers")) == ("no", "yes")
    assert _can(kubectl, "create", "ml-sharing") == "yes"
    [binding] = [
        b
        for b in _json(kubectl, "get", "rolebindings", "-n", "qs-sharing")["items"]
        if b["metadata"]["name"] == "fleet-team-claims"
    ]
    assert sorted(s["name"] for s in binding["subjects"]) == ["fleet-team", "ml-sharing"], binding

    # Without the refused file: validate 0, diff 0 and nothing shown.
    (root / REFUSED).unlink()
    assert cli.run(["validate", str(root), "--cluster", cluster]) == 0, capsys.readouterr().out
    capsys.readouterr()
    code = _cli(sandbox, helm_binary, "diff", str(root), "--cluster", cluster)
    out = capsys.readouterr()
    assert (code, out.out.strip()) == (0, ""), out.out + out.err

    # A later edit of an opaque parameter is exactly one change, and lands.
    template = root / "teams/qs-sharing/multiple-gpus.yaml"
    template.write_text(
        template.read_text().replace("defaultActiveThreadPercentage: 50", "defaultActiveThreadPercentage: 30")
    )
    code = _cli(sandbox, helm_binary, "diff", str(root), "--cluster", cluster, "-o", "json")
    out = capsys.readouterr()
    assert code == 1, out.out + out.err
    changed = [e for e in json.loads(out.out)["entries"] if e["action"] != "unchanged"]
    assert [(e["object"]["kind"], e["object"]["name"]) for e in changed] == [
        ("ResourceClaimTemplate", "multiple-gpus")
    ], changed
    code = _cli(sandbox, helm_binary, "apply", str(root), "--cluster", cluster)
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    live = _json(kubectl, "get", "resourceclaimtemplate", "multiple-gpus", "-n", "qs-sharing")
    mps = live["spec"]["spec"]["devices"]["config"][1]["opaque"]["parameters"]["sharing"]["mpsConfig"]
    assert mps["defaultActiveThreadPercentage"] == 30
