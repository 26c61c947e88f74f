"""The import's mapping as pure functions: live objects in, documents, IMPORT.md rows and origins out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.engine import ownership
from fleet.engine.imports import HelmRelease, Live, imported
from fleet.engine.imports.documents import clean
from fleet.engine.imports.lives import Rights
from fleet.engine.imports.repositories import plan, render
from fleet.errors import FleetError
from fleet.policy import featuregates
from tests import paths

CONTEXT = "by-hand"


GUIDE_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
}


def _live(**lists: Any) -> Live:
    """A cluster with the guide's DeviceClass (the NVIDIA driver's), unless ``device_classes`` says otherwise."""
    features = featuregates.ClusterFeatures(cluster="", file="", minor=36, enabled=featuregates.effective(36, {}))
    lists.setdefault("device_classes", [GUIDE_CLASS])
    rights = Rights(**{k: lists.pop(k) for k in ("roles", "role_bindings", "cluster_roles") if k in lists})
    return Live(context=CONTEXT, minor=36, features=features, rights=rights, **lists)


def _node(name: str, *, instance: str = "p5.48xlarge", labels: dict[str, str] | None = None, taints: Any = ()) -> Any:
    meta = {"name": name, "labels": {"node.kubernetes.io/instance-type": instance, **(labels or {})}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": {"taints": list(taints)}}


def _slice(node: str, gpus: int, product: str = "NVIDIA H100 80GB HBM3") -> dict[str, Any]:
    device = {
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": product}},
        "capacity": {"memory": {"value": "81559Mi"}},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-slice"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "devices": [dict(device) for _ in range(gpus)]},
    }


def _guide_template(name: str, namespace: str = "gpu-example") -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((paths.SEED / f"{name}.yaml").read_text())
    obj["metadata"].update(
        namespace=namespace,
        uid="9d1c",
        resourceVersion="42",
        creationTimestamp="2026-01-01T00:00:00Z",
        managedFields=[{"manager": "kubectl-client-side-apply"}],
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"},
    )
    obj["spec"]["metadata"] = {}
    for request in obj["spec"]["spec"]["devices"]["requests"]:
        request["exactly"].setdefault("allocationMode", "ExactCount")
        request["exactly"].setdefault("count", 1)
    return obj


def _docs(live: Live) -> dict[str, dict[str, Any]]:
    return {d.path: d.body for d in imported(live, cluster="east", fleet="gpus", context=CONTEXT).documents}


def test_a_template_is_written_as_the_guide_wrote_it() -> None:
    found = imported(_live(templates=[_guide_template("two-gpus")]), cluster="east", fleet="gpus", context=CONTEXT)
    body = next(d.body for d in found.documents if d.path == "teams/gpu-example/two-gpus.yaml")
    guide = yaml.safe_load((paths.SEED / "two-gpus.yaml").read_text())
    assert body["spec"] == guide["spec"]
    assert body["metadata"] == {
        "name": "two-gpus",
        "namespace": "gpu-example",
        "annotations": {"fleet.gpufleet.dev/adopt": "true"},
    }
    assert found.handover["resource.k8s.io/ResourceClaimTemplate/gpu-example/two-gpus"] == "created"
    assert found.handover["/Namespace//gpu-example"] == "adopted"


def test_clean_keeps_what_a_person_wrote_and_drops_what_the_server_and_helm_set() -> None:
    live = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {
            "name": "gpu.nvidia.com",
            "uid": "x",
            "generation": 3,
            "labels": {"app.kubernetes.io/managed-by": "Helm", "team": "ml"},
            "annotations": {"meta.helm.sh/release-name": "gpu-operator", "note": "kept"},
        },
        "spec": {"selectors": [{"cel": {"expression": "true"}}]},
        "status": {},
    }
    assert clean(live) == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com", "labels": {"team": "ml"}, "annotations": {"note": "kept"}},
        "spec": {"selectors": [{"cel": {"expression": "true"}}]},
    }


def test_a_pool_keeps_only_what_every_node_of_it_carries() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    extra = {"key": "maintenance", "effect": "NoExecute"}
    nodes = [
        _node("a", labels={"team": "ml", "zone": "1"}, taints=[taint]),
        _node("b", labels={"team": "ml", "zone": "2"}, taints=[taint, extra]),
        _node("cpu", instance="m5.large"),
    ]
    docs = _docs(_live(nodes=nodes, slices=[_slice("a", 8), _slice("b", 8)]))
    assert docs["pools/p5-48xlarge.yaml"]["spec"] == {
        "clusters": {"names": ["east"]},
        "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"},
        "labels": {"team": "ml"},
        "taints": [taint],
        "gpu": {"productName": "NVIDIA H100 80GB HBM3", "count": 8, "memory": "81559Mi"},
        "nodes": 2,
    }
    assert not [p for p in docs if "m5" in p], "a node without GPUs is no pool"


def test_a_node_unlike_its_pool_or_unselectable_is_listed_with_the_reason() -> None:
    bare = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare", "labels": {}}, "spec": {}}
    nodes = [_node("a"), _node("b"), _node("odd"), bare]
    slices = [_slice("a", 8), _slice("b", 8), _slice("odd", 4), _slice("bare", 8)]
    found = imported(_live(nodes=nodes, slices=slices), cluster="east", fleet="gpus", context=CONTEXT)
    rows = {u.what: u.reason for u in found.unmapped}
    assert "publishes 4x NVIDIA H100 80GB HBM3 where the pool expects 8x" in rows["Node odd"]
    assert "fits no pool" in rows["Node bare"]


def test_only_subjects_that_already_have_the_team_roles_rights_become_owners() -> None:
    """Binding a subject to fleet's team Role must grant it nothing it did not have (issue 45): get/list on
    claims makes no owner, a ClusterRole or Role that covers every verb on both resources does."""
    wide = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
    narrow = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list"]}
    named = {**wide, "resourceNames": ["one"]}

    def role(name: str, rule: dict[str, Any], kind: str = "Role") -> dict[str, Any]:
        meta = {"name": name} | ({"namespace": "gpu-example"} if kind == "Role" else {})
        return {"kind": kind, "metadata": meta, "rules": [rule]}

    def binding(name: str, role: str, group: str, kind: str = "Role") -> dict[str, Any]:
        return {
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": "gpu-example"},
            "roleRef": {"kind": kind, "name": role},
            "subjects": [{"kind": "Group", "name": group}],
        }

    live = _live(
        templates=[_guide_template("h100-gpu")],
        roles=[role("admin", wide), role("claims", narrow), role("one", named)],
        role_bindings=[
            binding("admins", "admin", "ops"),
            binding("users", "claims", "ml-research"),
            binding("one", "one", "named"),
        ],
    )
    found = imported(live, cluster="east", fleet="gpus", context=CONTEXT)
    team = next(d.body for d in found.documents if d.path == "teams/gpu-example/team.yaml")
    assert team["spec"]["owners"] == [{"kind": "Group", "name": "ops"}]
    rows = {u.what: u.reason for u in found.unmapped}
    assert (
        "would grant it create, watch, update, patch, delete on resourceclaims; create, get, list, watch, update, "
        "patch, delete on resourceclaimtemplates, which nobody gave it"
    ) in rows["Group ml-research in namespace gpu-example"]
    assert "Group named in namespace gpu-example" in rows

    live.rights.cluster_roles = [role("dra-edit", wide, kind="ClusterRole")]
    live.rights.role_bindings = [
        binding("editors", "dra-edit", "editors", kind="ClusterRole"),
        binding("ghost", "gone", "nobody", kind="ClusterRole"),
    ]
    found = imported(live, cluster="east", fleet="gpus", context=CONTEXT)
    team = next(d.body for d in found.documents if d.path == "teams/gpu-example/team.yaml")
    assert team["spec"]["owners"] == [{"kind": "Group", "name": "editors"}]
    rows = {u.what: u.reason for u in found.unmapped}
    assert "ghost (ClusterRole gone, not found)" in rows["Group nobody in namespace gpu-example"]


def test_server_and_controller_metadata_is_not_carried_and_pod_claims_are_not_declared() -> None:
    """A claim in use carries the API server's finalizer, which the schema refuses (issue 45)."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "single-gpu",
            "namespace": "gpu-example",
            "finalizers": ["resource.kubernetes.io/delete-protection"],
            "generateName": "x-",
            "uid": "u",
        },
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": {"reservedFor": [{"resource": "pods", "name": "pod1", "uid": "p"}]},
    }
    made = {
        **claim,
        "metadata": {
            "name": "pod1-gpu-abc",
            "namespace": "gpu-example",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
        },
    }
    found = imported(_live(claims=[claim, made]), cluster="east", fleet="gpus", context=CONTEXT)
    docs = {d.path: d.body for d in found.documents}
    assert docs["teams/gpu-example/single-gpu-claim.yaml"]["metadata"] == {
        "name": "single-gpu",
        "namespace": "gpu-example",
        "annotations": {"fleet.gpufleet.dev/adopt": "true"},
    }
    assert "status" not in docs["teams/gpu-example/single-gpu-claim.yaml"]
    assert not [p for p in docs if "pod1" in p]
    assert "1 ResourceClaim(s) made for pods from templates" in {u.what for u in found.unmapped}


def test_workloads_and_namespaces_without_templates_are_rows() -> None:
    def obj(kind: str, ns: str, name: str) -> dict[str, Any]:
        return {"kind": kind, "metadata": {"name": name, "namespace": ns}}

    names = ("gpu-example", "empty", "kube-system")
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in names]
    live = _live(
        templates=[_guide_template("h100-gpu")],
        namespaces=namespaces,
        workloads=[
            obj("Deployment", "gpu-example", "d"),
            obj("Pod", "gpu-example", "p"),
            obj("Pod", "kube-system", "k"),
        ],
    )
    rows = {u.what: u.reason for u in imported(live, cluster="east", fleet="gpus", context=CONTEXT).unmapped}
    assert rows["Deployments and Pods"].startswith("1 Deployment(s) and 1 Pod(s) in namespace(s) gpu-example:")
    assert "no Team declares it" in rows["Namespace empty"]
    assert "Namespace kube-system" not in rows and "Namespace gpu-example" not in rows


def test_a_quota_in_fleets_shape_becomes_the_teams_and_another_is_listed() -> None:
    def quota(name: str, hard: dict[str, str]) -> dict[str, Any]:
        return {"kind": "ResourceQuota", "metadata": {"name": name, "namespace": "gpu-example"}, "spec": {"hard": hard}}

    hard = {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4",
        "requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com": "4",
    }
    live = _live(
        templates=[_guide_template("h100-gpu")],
        quotas=[quota("fleet-devices", hard), quota("compute", {"requests.cpu": "10"})],
    )
    found = imported(live, cluster="east", fleet="gpus", context=CONTEXT)
    team = next(d.body for d in found.documents if d.path == "teams/gpu-example/team.yaml")
    assert team["spec"]["quota"] == {"gpu.nvidia.com": 4}
    assert found.handover["/ResourceQuota/gpu-example/fleet-devices"] == "adopted"
    assert (
        "not fleet's per-device-class shape"
        in {u.what: u.reason for u in found.unmapped}["ResourceQuota gpu-example/compute"]
    )


def test_templates_of_a_class_the_repository_cannot_declare_are_listed_not_imported() -> None:
    """A class deleted by hand after its templates were made, or one fleet manages for another cluster:
    a repository naming it would not validate, so its templates (and a quota on it) stay out, listed."""
    labels = {ownership.MANAGED_BY: ownership.MANAGER, ownership.CLUSTER_LABEL: "west"}
    ours = {**GUIDE_CLASS, "metadata": {"name": "gpu.nvidia.com", "labels": labels}}
    hard = {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4",
        "requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com": "4",
    }
    quota = {
        "kind": "ResourceQuota",
        "metadata": {"name": "fleet-devices", "namespace": "team-b"},
        "spec": {"hard": hard},
    }
    for classes in ([], [ours]):
        found = imported(
            _live(
                device_classes=classes,
                templates=[_guide_template("h100-gpu"), _guide_template("h100-gpu", namespace="team-b")],
                quotas=[quota],
            ),
            cluster="east",
            fleet="gpus",
            context=CONTEXT,
        )
        assert not [d for d in found.documents if d.path.startswith("teams/")], "no team without a template"
        rows = {u.what: u.reason for u in found.unmapped}
        assert (
            "requests DeviceClass gpu.nvidia.com, which this repository does not declare"
            in (rows["ResourceClaimTemplate gpu-example/h100-gpu"])
        )
        assert "ResourceClaimTemplate team-b/h100-gpu" in rows
        assert "/ResourceQuota/team-b/fleet-devices" not in found.handover


def test_templates_in_a_reserved_namespace_and_claims_of_pods_are_listed_not_imported() -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "pod-gpu-x", "namespace": "gpu-example", "ownerReferences": [{"kind": "Pod"}]},
        "spec": {},
    }
    found = imported(
        _live(templates=[_guide_template("h100-gpu", namespace="default")], claims=[claim]),
        cluster="east",
        fleet="gpus",
        context=CONTEXT,
    )
    assert not [d for d in found.documents if d.path.startswith("teams/")]
    rows = {u.what: u.reason for u in found.unmapped}
    assert "fleet gives no team a reserved namespace" in rows["ResourceClaimTemplate default/h100-gpu"]
    assert "1 ResourceClaim(s) made for pods from templates" in rows


def test_the_operator_keeps_only_the_user_supplied_values_and_the_given_repository() -> None:
    values = {"driver": {"enabled": False}}
    release = HelmRelease("gpu-operator", "gpu-operator", "gpu-operator", "v26.7.0", "deployed", values)
    docs = _docs(_live(operator=release))
    assert docs["operator/gpu-operator.yaml"]["spec"] == {
        "chart": {"repository": "https://helm.ngc.nvidia.com/nvidia", "name": "gpu-operator", "version": "v26.7.0"},
        "namespace": "gpu-operator",
        "installPath": "preinstalledDriver",
        "values": values,
    }
    failed = HelmRelease("gpu-operator", "gpu-operator", "gpu-operator", "v26.7.0", "failed", {})
    found = imported(_live(operator=failed), cluster="east", fleet="gpus", context=CONTEXT)
    assert not [d for d in found.documents if d.path.startswith("operator/")]
    assert "its status is failed" in found.unmapped[0].reason


def test_a_cluster_records_the_gates_that_differ_from_its_minors_defaults() -> None:
    on = featuregates.effective(36, {}) - {"DRAExtendedResource"}
    live = _live()
    live.features = featuregates.ClusterFeatures(cluster="", file="", minor=36, enabled=on)
    spec = _docs(live)["clusters/east.yaml"]["spec"]
    assert spec == {"kubernetesVersion": "1.36", "context": CONTEXT, "featureGates": {"DRAExtendedResource": False}}


def test_files_say_where_each_object_came_from(tmp_path: Path) -> None:
    found = imported(_live(templates=[_guide_template("two-gpus")]), cluster="east", fleet="gpus", context=CONTEXT)
    text = render(next(d for d in found.documents if d.path.endswith("two-gpus.yaml")))
    comment = " ".join(line.removeprefix("# ") for line in text.splitlines() if line.startswith("# "))
    assert comment == (
        "Imported by fleetctl import: ResourceClaimTemplate gpu-example/two-gpus, read from context by-hand "
        '(managed by field manager "kubectl-client-side-apply").'
    )
    assert yaml.safe_load(text)["metadata"]["name"] == "two-gpus"
    files = plan(tmp_path / "new", found, cluster="east", fleet="gpus", context=CONTEXT)
    assert "| the owners of namespace gpu-example |" in files["IMPORT.md"]


def test_a_second_cluster_joins_an_existing_fleet_and_shares_its_files(tmp_path: Path) -> None:
    live = _live(templates=[_guide_template("two-gpus")])
    root = tmp_path / "fleet"
    for name, text in plan(root, imported(live, cluster="east", fleet="gpus", context=CONTEXT), cluster="east",
                           fleet="gpus", context=CONTEXT).items():  # fmt: skip
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    files = plan(
        root, imported(live, cluster="west", fleet="gpus", context=CONTEXT), cluster="west", fleet=None, context=CONTEXT
    )
    assert yaml.safe_load(files["fleet.yaml"])["spec"]["clusters"] == ["east", "west"]
    assert yaml.safe_load(files["teams/gpu-example/team.yaml"])["spec"]["clusters"]["names"] == ["east", "west"]
    assert "## cluster east" in files["IMPORT.md"] and "## cluster west" in files["IMPORT.md"]
    with pytest.raises(FleetError, match="already in fleet 'gpus'"):
        plan(
            root,
            imported(live, cluster="east", fleet="gpus", context=CONTEXT),
            cluster="east",
            fleet=None,
            context=CONTEXT,
        )


def test_a_dra_kind_fleet_does_not_declare_is_listed_once() -> None:
    rule = {"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule", "metadata": {"name": "drain-gpu-3"}}
    found = imported(_live(others=[rule, {**rule, "apiVersion": "resource.k8s.io/v1alpha3"}]), cluster="east",
                     fleet="gpus", context=CONTEXT)  # fmt: skip
    assert [u.what for u in found.unmapped] == ["DeviceTaintRule drain-gpu-3"]
    assert found.unmapped[0].reason.startswith("this cluster has no DeviceTaintRule API a GPUMaintenance is")


def test_the_files_are_validated_before_they_are_written_and_a_second_cluster_joins(tmp_path: Path) -> None:
    from fleet.engine.imports.repositories import write

    gpu_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
    }
    live = _live(templates=[_guide_template("two-gpus")], device_classes=[gpu_class])
    root = tmp_path / "fleet"
    east = imported(live, cluster="east", fleet="gpus", context=CONTEXT)
    plan_east = write(root, plan(root, east, cluster="east", fleet="gpus", context=CONTEXT), cluster="east").plan
    assert {d.ref.name for d in plan_east.objects} >= {"two-gpus", "gpu.nvidia.com", "gpu-example"}
    assert not list(tmp_path.glob(".fleet.import-*")), "the staging directory is renamed into place"

    west = imported(live, cluster="west", fleet="gpus", context=CONTEXT)
    write(root, plan(root, west, cluster="west", fleet=None, context=CONTEXT), cluster="west")
    assert yaml.safe_load((root / "teams/gpu-example/team.yaml").read_text())["spec"]["clusters"]["names"] == [
        "east",
        "west",
    ]

    broken = imported(live, cluster="north", fleet="gpus", context=CONTEXT)
    files = plan(root, broken, cluster="north", fleet=None, context=CONTEXT)
    files["clusters/north.yaml"] = files["clusters/north.yaml"].replace("'1.36'", "'one'")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with pytest.raises(FleetError, match="does not validate, so nothing was written"):
        write(root, files, cluster="north")
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_a_template_another_tool_keeps_is_adopted_not_made_fleets() -> None:
    charted = _guide_template("h100-gpu")
    charted["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "Helm"}
    charted["metadata"]["annotations"]["meta.helm.sh/release-name"] = "research"
    found = imported(_live(templates=[charted, _guide_template("two-gpus")]), cluster="east", fleet="gpus",
                     context=CONTEXT)  # fmt: skip
    assert found.handover["resource.k8s.io/ResourceClaimTemplate/gpu-example/h100-gpu"] == "adopted"
    assert found.handover["resource.k8s.io/ResourceClaimTemplate/gpu-example/two-gpus"] == "created"


def test_a_namespace_without_owners_gets_a_team_that_grants_no_guessed_subject(tmp_path: Path) -> None:
    """No RoleBinding binds a Role within fleet's team Role: the Team names no owner (``[]``), so fleet's
    RoleBinding binds the team's own ServiceAccount only, and IMPORT.md says to fill the owners in."""
    from fleet.engine.imports.repositories import write

    found = imported(_live(templates=[_guide_template("two-gpus")]), cluster="east", fleet="gpus", context=CONTEXT)
    team = next(d for d in found.documents if d.path == "teams/gpu-example/team.yaml")
    assert team.body["spec"]["owners"] == []
    assert "owners: none found, fill them in (IMPORT.md)" in team.comment
    root = tmp_path / "fleet"
    files = plan(root, found, cluster="east", fleet="gpus", context=CONTEXT)
    [row] = [r for r in files["IMPORT.md"].splitlines() if r.startswith("| the owners of namespace gpu-example")]
    assert "grants no one it guessed" in row and "Fill in spec.owners of teams/gpu-example/team.yaml" in row
    bindings = [d.body for d in write(root, files, cluster="east").plan.objects if d.body["kind"] == "RoleBinding"]
    assert [b["subjects"] for b in bindings] == [
        [{"kind": "ServiceAccount", "name": "fleet-team", "namespace": "gpu-example"}]
    ]


def test_a_label_or_taint_only_some_nodes_of_a_pool_carry_is_a_row() -> None:
    extra = {"key": "maintenance", "effect": "NoExecute"}
    valued = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    nodes = [
        _node("a", labels={"team": "ml", "zone": "1", "rack": "r7"}, taints=[valued]),
        _node("b", labels={"team": "ml", "zone": "2"}, taints=[valued, extra]),
        _node("c", labels={"team": "ml", "zone": "2"}),
    ]
    found = imported(
        _live(nodes=nodes, slices=[_slice(n, 8) for n in "abc"]), cluster="east", fleet="gpus", context=CONTEXT
    )
    pool = next(d.body for d in found.documents if d.path == "pools/p5-48xlarge.yaml")
    assert (pool["spec"]["labels"], pool["spec"].get("taints")) == ({"team": "ml"}, None)
    rows = {u.what: u.reason for u in found.unmapped}
    assert rows["label zone of pool p5-48xlarge"].startswith("3 of 3 Nodes carry it (zone=1 on a; zone=2 on b, c): ")
    assert rows["label rack of pool p5-48xlarge"].startswith("1 of 3 Nodes carry it (rack=r7 on a): ")
    assert rows["taint dedicated=ml:NoSchedule of pool p5-48xlarge"].startswith("2 of 3 Nodes carry it (a, b): ")
    assert rows["taint maintenance:NoExecute of pool p5-48xlarge"].startswith("1 of 3 Nodes carry it (b): ")
    assert all(r.endswith("it stays on those Nodes as it is") for w, r in rows.items() if "of pool" in w)
    assert len(rows) == 4


def test_a_taint_is_compared_by_key_value_and_effect_and_each_carrier_named_once() -> None:
    """The pool's taints are those every node carries alike (an empty value is no value); a node listing the
    same taint twice (the API server keeps what it was given) is named once in the row."""
    bare = {"key": "dedicated", "effect": "NoSchedule"}
    empty = {"key": "dedicated", "value": "", "effect": "NoSchedule"}
    other = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    nodes = [
        _node("a", taints=[bare, other, other]),
        _node("b", taints=[empty]),
        _node("c", taints=[bare, {**other, "timeAdded": "2026-12-06T00:00:00Z"}]),
    ]
    found = imported(
        _live(nodes=nodes, slices=[_slice(n, 8) for n in "abc"]), cluster="east", fleet="gpus", context=CONTEXT
    )
    pool = next(d.body for d in found.documents if d.path == "pools/p5-48xlarge.yaml")
    assert pool["spec"]["taints"] == [{"key": "dedicated", "effect": "NoSchedule"}]
    rows = {u.what: u.reason for u in found.unmapped}
    assert rows["taint dedicated=ml:NoSchedule of pool p5-48xlarge"].startswith("2 of 3 Nodes carry it (a, c): ")
    assert len(rows) == 1


def test_a_node_a_pool_selects_that_publishes_no_gpus_is_a_row() -> None:
    nodes = [_node("a"), _node("b"), _node("cpu", instance="m5.large")]
    found = imported(_live(nodes=nodes, slices=[_slice("a", 8)]), cluster="east", fleet="gpus", context=CONTEXT)
    rows = {u.what: u.reason for u in found.unmapped}
    assert list(rows) == ["Node b"]
    assert rows["Node b"].startswith("pool p5-48xlarge selects it (node.kubernetes.io/instance-type=p5.48xlarge) but")


def test_a_namespaces_admin_access_label_is_the_teams_and_its_other_metadata_a_row() -> None:
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "gpu-example",
            "uid": "1",
            "labels": {
                "kubernetes.io/metadata.name": "gpu-example",
                "resource.kubernetes.io/admin-access": "true",
                "pod-security.kubernetes.io/enforce": "baseline",
            },
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "owner": "ml"},
        },
    }
    found = imported(
        _live(templates=[_guide_template("two-gpus")], namespaces=[namespace]),
        cluster="east",
        fleet="gpus",
        context=CONTEXT,
    )
    team = next(d.body for d in found.documents if d.path == "teams/gpu-example/team.yaml")
    assert team["spec"]["adminAccess"] is True
    rows = {u.what: u.reason for u in found.unmapped}
    assert rows["the metadata of Namespace gpu-example"] == (
        "a Team declares no labels or annotations of its namespaces but fleet's own: label "
        "pod-security.kubernetes.io/enforce=baseline, annotation owner stay on the namespace as they are"
    )
