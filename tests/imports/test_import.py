"""``fleetctl import`` on the sandbox: a cluster set up by hand, as the DRA guide does it, diffs to zero.

The guide's steps are run by hand: NVIDIA's vendored chart through the real helm
(``helm upgrade --install`` with the guide's ``--set`` flags), the guide's claim
templates from ``tests/data/guide`` with kubectl, and one pool's nodes labelled and
tainted with kubectl. Then ``fleetctl import`` writes the repository, ``validate``
passes, ``diff`` exits 0 showing nothing, ``apply`` makes no write the API server
counts, and ``apply --prune`` of the repository without one template deletes exactly
that template.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet import helm
from fleet.engine import stages
from fleet.sandbox import Sandbox, clusters, credentials
from fleet.sandbox.operators import StandInOperator
from fleetctl import cli
from tests import paths
from tests import servermetrics as metrics
from tests.apply.conftest import Engine
from tests.apply.repos import Repo
from tests.conftest import Kubectl, helm_settings_of, kubectl_of
from tests.operator.conftest import NAMESPACE, RELEASE, UPSTREAM
from tests.waits import wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("cleanup_release")]

GUIDE_NS = "gpu-example"
TEMPLATES = ("h100-gpu", "large-memory-gpu", "two-gpus")
HAND_LABEL = ("gpufleet.dev/team", "ml")
HAND_TAINT = "gpufleet.dev/dedicated=ml:NoSchedule"
SERVER_FIELDS = ("uid:", "resourceVersion:", "managedFields:", "creationTimestamp:", "status:", "last-applied")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory, binaries_cache: Path) -> Iterator[Sandbox]:
    """A control plane of this module's own: the import reads the whole cluster, and the session's
    holds what every test before left there (teams, classes fleet manages for other clusters, node
    labels), which is no cluster set up by hand."""
    directory = tmp_path_factory.mktemp("hand-sandbox")
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


@pytest.fixture(scope="module")
def helm_settings(sandbox: Sandbox, helm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> helm.Settings:
    return helm_settings_of(sandbox, helm_binary, tmp_path_factory)


def _helm_install(settings: helm.Settings, chart_repo: str) -> None:
    """The guide's install, by hand."""
    argv = [str(settings.binary), "upgrade", "--install", RELEASE, "gpu-operator", "--repo", chart_repo]
    argv += ["--version", "v26.7.0", "--namespace", NAMESPACE, "--create-namespace"]
    argv += ["--set", "clusterPolicy.deployCR=false", "--set", "gpuCluster.deployCR=true"]
    argv += ["--set", "driver.nvidiaDriverCRD.enabled=true", "--set", "draDriver.computeDomains.enabled=false"]
    argv += ["--kube-context", credentials.CLUSTER, "--kubeconfig", str(settings.kubeconfig)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr


def _pool_nodes(kubectl: Kubectl) -> list[str]:
    """The nodes of one GPU pool of the sandbox (those publishing H100s)."""
    out = kubectl("get", "nodes", "-l", "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3", "-o", "name").stdout
    nodes = [n.removeprefix("node/") for n in out.split()]
    assert nodes, "the sandbox has H100 nodes"
    return nodes


@pytest.fixture()
def by_hand(sandbox: Sandbox, kubectl: Kubectl, chart_repo: str, helm_settings: helm.Settings) -> Iterator[list[str]]:
    """The cluster set up by hand; afterwards the hand-made objects are removed again."""
    _helm_install(helm_settings, chart_repo)
    kubectl("create", "namespace", GUIDE_NS)
    for name in TEMPLATES:
        kubectl("apply", "-f", str(paths.SEED / f"{name}.yaml"))
    nodes = _pool_nodes(kubectl)
    kubectl("label", "--overwrite", "nodes", *nodes, "=".join(HAND_LABEL))
    kubectl("taint", "--overwrite", "nodes", *nodes, HAND_TAINT)
    try:
        yield nodes
    finally:
        kubectl("delete", "namespace", GUIDE_NS, "--wait=true", "--timeout=120s", check=False)
        kubectl("label", "nodes", *nodes, f"{HAND_LABEL[0]}-", check=False)
        kubectl("taint", "nodes", *nodes, f"{HAND_TAINT.split('=')[0]}:NoSchedule-", check=False)


def _cli(*argv: str, sandbox: Sandbox, settings: helm.Settings) -> int:
    common = ["--kubeconfig", str(sandbox.kubeconfig), "--context", credentials.CLUSTER]
    return cli.run([*argv, *common, "--helm", str(settings.binary)])


def test_a_cluster_set_up_by_hand_imports_to_a_repository_that_diffs_to_zero(
    sandbox: Sandbox,
    kubectl: Kubectl,
    by_hand: list[str],
    chart_repo: str,
    helm_settings: helm.Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    cluster = f"hand-{uuid.uuid4().hex[:6]}"
    root = tmp_path / "fleet"
    counter = Engine(sandbox, Repo(root=tmp_path / "unused"))
    resources = set(stages.WRITTEN_RESOURCES)

    def ledger() -> list[str]:
        """The resourceVersions of the cluster's ledger ConfigMaps (others write ConfigMaps too)."""
        label = f"fleet.gpufleet.dev/cluster={cluster}"
        argv = ("get", "configmaps", "-n", "fleet-system", "-l", label, "-o", "jsonpath={..resourceVersion}")
        return sorted(kubectl(*argv).stdout.split())

    def writes(*argv: str) -> tuple[int, dict[metrics.Key, int]]:
        """The command's exit code and the writes the API server counted while it ran, by resource."""
        before = metrics.request_totals(counter.run(lambda c: c.metrics()))
        code = _cli(*argv, sandbox=sandbox, settings=helm_settings)
        after = metrics.request_totals(counter.run(lambda c: c.metrics()))
        found = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
        return code, {k: n for k, n in found.items() if metrics.writes(Counter(), Counter({k: n}), resources=resources)}

    with StandInOperator(sandbox, upstream=UPSTREAM):  # the operator's controller, played
        # As on a real cluster, the operator has done its work (the DRA driver's objects, its
        # DeviceClasses among them, then the GPUCluster's status) before anyone imports.
        wait_for(
            lambda: (
                kubectl("get", "gpucluster", "gpu-cluster", "-o", "jsonpath={.status.state}", check=False).stdout
                == "ready"
            ),
            what="the played operator reports GPUCluster gpu-cluster ready",
            within=120,
        )
        before = metrics.request_totals(counter.run(lambda c: c.metrics()))
        code = _cli(
            "import", str(root), "--cluster", cluster, "--chart-repository", chart_repo,
            sandbox=sandbox, settings=helm_settings,
        )  # fmt: skip
        out = capsys.readouterr()
        assert code == 0, out.out + out.err
        after = metrics.request_totals(counter.run(lambda c: c.metrics()))
        dry_runs = {k[1]: after[k] - before.get(k, 0) for k in after if k[3] and after[k] != before.get(k, 0)}
        # The take-over dry-runs nothing it takes over: what is left is the import's probe of the
        # DRA API and the team's one impersonation check (its templates' namespace and kind).
        assert not {"namespaces", "nodes", "roles", "rolebindings", "resourcequotas"} & dry_runs.keys(), dry_runs
        assert dry_runs.get("resourceclaimtemplates", 0) <= 1, dry_runs

        # The files are written for people: origin comments, no server-set fields.
        template = (root / "teams" / GUIDE_NS / "two-gpus.yaml").read_text()
        assert template.startswith("# Imported by fleetctl import: ResourceClaimTemplate gpu-example/two-gpus")
        for doc in root.rglob("*.yaml"):
            text = doc.read_text()
            assert not [f for f in SERVER_FIELDS if f in text], doc
        assert yaml.safe_load(template)["spec"] == yaml.safe_load((paths.SEED / "two-gpus.yaml").read_text())["spec"]
        operator = yaml.safe_load((root / "operator" / "gpu-operator.yaml").read_text())["spec"]
        assert operator["chart"] == {"repository": chart_repo, "name": "gpu-operator", "version": "v26.7.0"}
        assert operator["values"] == {
            "clusterPolicy": {"deployCR": False},
            "gpuCluster": {"deployCR": True},
            "driver": {"nvidiaDriverCRD": {"enabled": True}},
            "draDriver": {"computeDomains": {"enabled": False}},
        }
        pools = [yaml.safe_load(p.read_text())["spec"] for p in (root / "pools").glob("*.yaml")]
        hand = [p for p in pools if p.get("labels", {}).get(HAND_LABEL[0]) == HAND_LABEL[1]]
        assert len(hand) == 1 and hand[0]["nodes"] == len(by_hand)
        assert {"key": "gpufleet.dev/dedicated", "value": "ml", "effect": "NoSchedule"} in hand[0]["taints"]
        assert (root / "IMPORT.md").read_text().startswith("# What `fleetctl import` could not map")

        assert cli.run(["validate", str(root)]) == 0, capsys.readouterr().out
        capsys.readouterr()

        recorded = ledger()
        assert recorded, "the import's take-over recorded a ledger"
        code, written = writes("diff", str(root), "--cluster", cluster)
        out = capsys.readouterr()
        assert (code, written, out.out.strip()) == (0, {}, ""), out.out + out.err

        code, written = writes("apply", str(root), "--cluster", cluster)
        out = capsys.readouterr()
        assert (code, written) == (0, {}), out.out + out.err
        assert ledger() == recorded

        (root / "teams" / GUIDE_NS / "two-gpus.yaml").unlink()
        code = _cli(
            "apply", str(root), "--cluster", cluster, "--prune", "-o", "json", sandbox=sandbox, settings=helm_settings
        )
        out = capsys.readouterr()
        assert code == 0, out.out + out.err
        changed = [e for e in json.loads(out.out)["entries"] if e["action"] != "unchanged"]
        assert [(e["action"], e["object"]["kind"], e["object"]["name"]) for e in changed] == [
            ("deleted", "ResourceClaimTemplate", "two-gpus")
        ]
        left = kubectl("get", "resourceclaimtemplates", "-n", GUIDE_NS, "-o", "name").stdout.split()
        assert sorted(left) == [f"resourceclaimtemplate.resource.k8s.io/{n}" for n in ("h100-gpu", "large-memory-gpu")]

        _release_all(root, cluster=cluster, sandbox=sandbox, settings=helm_settings)


def _release_all(root: Path, *, cluster: str, sandbox: Sandbox, settings: helm.Settings) -> None:
    """Give back what the import took over (the sandbox is shared): an apply --prune of the bare fleet."""
    for folder in ("pools", "teams", "deviceclasses", f"clusters/{cluster}/maintenance"):
        for f in sorted((root / folder).rglob("*.yaml"), reverse=True):
            f.unlink()
    assert (
        _cli("apply", str(root), "--cluster", cluster, "--prune", "--allow-empty", sandbox=sandbox, settings=settings)
        == 0
    )


def _taint_rule(
    name: str, *, pool: str, device: str, taint: dict[str, str], driver: str = "gpu.nvidia.com", **meta: Any
) -> dict[str, Any]:
    """A DeviceTaintRule as kubectl applies it (``meta``: labels, annotations)."""
    meta["name"] = name
    selector = {"driver": driver, "pool": pool, "device": device}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": meta,
        "spec": {"deviceSelector": selector, "taint": taint},
    }


def _taint_rules(kubectl: Kubectl) -> dict[str, dict[str, Any]]:
    items = json.loads(kubectl("get", "devicetaintrules", "-o", "json").stdout)["items"]
    return {r["metadata"]["name"]: r for r in items}


def test_device_taint_rules_made_by_hand_and_by_fleet_import_to_maintenances_that_diff_to_zero(
    sandbox: Sandbox,
    kubectl: Kubectl,
    helm_settings: helm.Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rule made by hand (its own name and taint key) and one as fleet writes it (a maintenance's name,
    label, reason and taint) become GPUMaintenances; another driver's rule is a row. After the take-over
    the hand-made rule is fleet's under its own name (no twin), `validate` passes and `diff` shows
    nothing; removing its file and pruning deletes it: the device returns."""
    monkeypatch.setenv("NO_COLOR", "1")
    cluster = f"maint-{uuid.uuid4().hex[:6]}"
    root = tmp_path / "fleet"
    a, b = _pool_nodes(kubectl)[:2]
    by_hand = _taint_rule(
        "gpu3-psu-swap",
        pool=a,
        device="gpu-3",
        taint={"key": "example.com/repair", "value": "psu", "effect": "NoSchedule"},
    )
    fleets = _taint_rule(
        f"fan.{b}.gpu-1",
        pool=b,
        device="gpu-1",
        taint={"key": "fleet.gpufleet.dev/maintenance", "value": "fan", "effect": "NoExecute"},
        labels={"fleet.gpufleet.dev/maintenance": "fan"},
        annotations={"fleet.gpufleet.dev/reason": "fan replaced, ticket 4711"},
    )
    nic = _taint_rule(
        "nic-flap",
        pool=a,
        device="eth-0",
        driver="mellanox.com",
        taint={"key": "example.com/nic", "effect": "NoSchedule"},
    )
    items = [by_hand, fleets, nic]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    try:
        added = _taint_rules(kubectl)["gpu3-psu-swap"]["spec"]["taint"]["timeAdded"]
        code = _cli("import", str(root), "--cluster", cluster, sandbox=sandbox, settings=helm_settings)
        out = capsys.readouterr()
        assert code == 0, out.out + out.err

        folder = root / "clusters" / cluster / "maintenance"
        assert sorted(p.name for p in folder.iterdir()) == ["fan.yaml", "gpu3-psu-swap.yaml"]
        hand = yaml.safe_load((folder / "gpu3-psu-swap.yaml").read_text())
        assert hand["metadata"] == {"name": "gpu3-psu-swap", "annotations": {"fleet.gpufleet.dev/adopt": "true"}}
        assert hand["spec"] == {
            "devices": {"nodes": [a], "devices": ["gpu-3"]},
            "reason": "Imported by fleetctl import from DeviceTaintRule gpu3-psu-swap with taint "
            "example.com/repair=psu.",
            "effect": "NoSchedule",
            "direct": True,
        }
        fan = yaml.safe_load((folder / "fan.yaml").read_text())
        assert fan["spec"] == {
            "devices": {"nodes": [b], "devices": ["gpu-1"]},
            "reason": "fan replaced, ticket 4711",
            "effect": "NoExecute",
        }
        [row] = [r for r in (root / "IMPORT.md").read_text().splitlines() if r.startswith("| DeviceTaintRule")]
        assert row.startswith("| DeviceTaintRule nic-flap | it takes devices of driver mellanox.com"), row

        live = _taint_rules(kubectl)
        assert sorted(live) == sorted(r["metadata"]["name"] for r in items), "taken over, no twin written"
        taken = live["gpu3-psu-swap"]
        assert taken["metadata"]["labels"]["fleet.gpufleet.dev/maintenance"] == "gpu3-psu-swap"
        assert taken["spec"]["taint"] == {
            "key": "fleet.gpufleet.dev/maintenance",
            "value": "gpu3-psu-swap",
            "effect": "NoSchedule",
            "timeAdded": added,  # the effect stays, so does the time it took effect
        }
        assert live[f"fan.{b}.gpu-1"]["spec"]["taint"]["effect"] == "NoExecute"
        assert "fleet.gpufleet.dev/maintenance" not in live["nic-flap"]["metadata"].get("labels", {})

        assert cli.run(["validate", str(root)]) == 0, capsys.readouterr().out
        capsys.readouterr()
        code = _cli("diff", str(root), "--cluster", cluster, sandbox=sandbox, settings=helm_settings)
        out = capsys.readouterr()
        assert (code, out.out.strip()) == (0, ""), out.out + out.err

        (folder / "gpu3-psu-swap.yaml").unlink()
        code = _cli(
            "apply", str(root), "--cluster", cluster, "--prune", "-o", "json", sandbox=sandbox, settings=helm_settings
        )
        out = capsys.readouterr()
        assert code == 0, out.out + out.err
        changed = [e for e in json.loads(out.out)["entries"] if e["action"] != "unchanged"]
        assert [(e["action"], e["object"]["kind"], e["object"]["name"]) for e in changed] == [
            ("deleted", "DeviceTaintRule", "gpu3-psu-swap")
        ]
        assert "gpu3-psu-swap" not in _taint_rules(kubectl)

        _release_all(root, cluster=cluster, sandbox=sandbox, settings=helm_settings)
        assert sorted(_taint_rules(kubectl)) == ["nic-flap"], "the prune deleted fleet's rules: the devices return"
    finally:
        kubectl("delete", "devicetaintrules", "--all", "--wait=true", check=False)


def _can_claim(kubectl: Kubectl, group: str) -> str:
    """What the API server answers a member of ``group`` asking to create claims in the guide's namespace."""
    argv = ("auth", "can-i", "create", "resourceclaims.resource.k8s.io", "-n", GUIDE_NS, "--as", "someone")
    return kubectl(*argv, "--as-group", group, check=False).stdout.strip()


def test_the_take_over_grants_nobody_the_import_guessed_and_apply_binds_the_owners_filled_in(
    sandbox: Sandbox,
    kubectl: Kubectl,
    by_hand: list[str],
    chart_repo: str,
    helm_settings: helm.Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The guide's namespace has no RoleBinding to take owners from: the Team names none, IMPORT.md says
    to fill them in, and until then the only subject fleet binds is the team's own ServiceAccount."""
    cluster = f"owners-{uuid.uuid4().hex[:6]}"
    root = tmp_path / "fleet"
    cluster_bindings = kubectl("get", "clusterrolebindings", "-o", "name").stdout.split()
    with StandInOperator(sandbox, upstream=UPSTREAM):
        wait_for(
            lambda: (
                kubectl("get", "gpucluster", "gpu-cluster", "-o", "jsonpath={.status.state}", check=False).stdout
                == "ready"
            ),
            what="the played operator reports GPUCluster gpu-cluster ready",
            within=120,
        )
        code = _cli(
            "import", str(root), "--cluster", cluster, "--chart-repository", chart_repo,
            sandbox=sandbox, settings=helm_settings,
        )  # fmt: skip
        out = capsys.readouterr()
        assert code == 0, out.out + out.err

        assert _can_claim(kubectl, f"{GUIDE_NS}-owners") == "no"
        bindings = json.loads(kubectl("get", "rolebindings", "-n", GUIDE_NS, "-o", "json").stdout)["items"]
        assert [(b["metadata"]["name"], b["subjects"]) for b in bindings] == [
            ("fleet-team-claims", [{"kind": "ServiceAccount", "name": "fleet-team", "namespace": GUIDE_NS}])
        ]
        assert kubectl("get", "clusterrolebindings", "-o", "name").stdout.split() == cluster_bindings
        team = root / "teams" / GUIDE_NS / "team.yaml"
        assert yaml.safe_load(team.read_text())["spec"]["owners"] == []
        [row] = [r for r in (root / "IMPORT.md").read_text().splitlines() if r.startswith("| the owners of namespace")]
        assert f"Fill in spec.owners of teams/{GUIDE_NS}/team.yaml" in row, row

        team.write_text(team.read_text().replace("owners: []", "owners:\n  - {kind: Group, name: ml-research}"))
        assert _cli("apply", str(root), "--cluster", cluster, sandbox=sandbox, settings=helm_settings) == 0
        capsys.readouterr()
        assert _can_claim(kubectl, "ml-research") == "yes"
        assert _can_claim(kubectl, f"{GUIDE_NS}-owners") == "no"

        _release_all(root, cluster=cluster, sandbox=sandbox, settings=helm_settings)


def test_a_label_and_a_taint_only_some_nodes_of_a_pool_carry_are_rows_of_import_md(
    sandbox: Sandbox, kubectl: Kubectl, helm_settings: helm.Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = _pool_nodes(kubectl)
    assert len(nodes) > 1, "the pool has nodes that do not carry them"
    kubectl("label", "--overwrite", "nodes", nodes[0], "gpufleet.dev/rack=r7")
    kubectl("taint", "--overwrite", "nodes", nodes[0], "gpufleet.dev/repair=psu:NoSchedule")
    try:
        root = tmp_path / "fleet"
        code = _cli("import", str(root), "--cluster", "partial", "--no-adopt", sandbox=sandbox, settings=helm_settings)
        out = capsys.readouterr()
        assert code == 0, out.out + out.err
    finally:
        kubectl("label", "nodes", nodes[0], "gpufleet.dev/rack-", check=False)
        kubectl("taint", "nodes", nodes[0], "gpufleet.dev/repair:NoSchedule-", check=False)
    rows = {r.split(" | ")[0].removeprefix("| "): r for r in (root / "IMPORT.md").read_text().splitlines()}
    [label] = [r for w, r in rows.items() if w.startswith("label gpufleet.dev/rack of pool ")]
    [taint] = [r for w, r in rows.items() if w.startswith("taint gpufleet.dev/repair=psu:NoSchedule of pool ")]
    assert f"1 of {len(nodes)} Nodes carry it (gpufleet.dev/rack=r7 on {nodes[0]})" in label
    assert f"1 of {len(nodes)} Nodes carry it ({nodes[0]})" in taint
    pools = [yaml.safe_load(p.read_text())["spec"] for p in (root / "pools").glob("*.yaml")]
    assert not [p for p in pools if "gpufleet.dev/rack" in p.get("labels", {})], "a pool keeps what all carry"
