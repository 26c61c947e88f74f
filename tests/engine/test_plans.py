"""Desired state from the example repository: tenancy objects, ownership stamps, stage order."""

from __future__ import annotations

from fleet.engine import STAGES, impersonations, ownership, plans, renders, stages
from fleet.manifests.views import resolve
from tests.manifests.repos import example_files, load


def _plan(cluster: str = "gpu-east") -> plans.Plan:
    return renders.plan(resolve(load(example_files()), cluster=cluster), revision="abc123")


def test_team_gets_namespaces_role_binding_and_quota() -> None:
    objs = {(d.ref.kind, d.ref.namespace, d.ref.name): d.obj for d in _plan().objects}
    role = objs[("Role", "inference", renders.TEAM_ROLE)]
    assert role["rules"] == [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims", "resourceclaimtemplates"],
            "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"],
        }
    ]
    binding = objs[("RoleBinding", "inference-canary", renders.TEAM_ROLE)]
    assert binding["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "inference-oncall"},
        # the team's own identity, in its first namespace: fleet writes the team's objects as it
        {"kind": "ServiceAccount", "name": impersonations.SERVICE_ACCOUNT, "namespace": "inference"},
    ]
    assert ("ServiceAccount", "inference", impersonations.SERVICE_ACCOUNT) in objs
    assert ("ServiceAccount", "inference-canary", impersonations.SERVICE_ACCOUNT) not in objs
    assert binding["roleRef"]["name"] == renders.TEAM_ROLE
    quota = objs[("ResourceQuota", "ml-research", renders.QUOTA_NAME)]
    assert quota["spec"]["hard"] == {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "16",
        "requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com": "16",
        "requests.nvidia.com/gpu": "16",
        "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "4",
        "requests.deviceclass.resource.kubernetes.io/mig.nvidia.com": "4",
    }
    assert ("Namespace", "", "inference-canary") in objs


def test_quota_has_extended_resource_keys_only_where_the_cluster_has_dra_extended_resource() -> None:
    """On 1.35 (DRAExtendedResource off by default) no pod gets a class's devices by an extended
    resource name, so the quota caps devices alone; declaring the gate brings the keys back."""
    files = example_files()
    west = files["clusters/gpu-west.yaml"]

    def hard(cluster: bytes) -> dict[str, str]:
        view = resolve(load(files | {"clusters/gpu-west.yaml": cluster}), cluster="gpu-west")
        objs = {(d.ref.kind, d.ref.namespace): d.obj for d in renders.plan(view, revision="r").objects}
        return dict(objs[("ResourceQuota", "ml-research")]["spec"]["hard"])

    old = west.replace(b'"1.36"', b'"1.35"')
    assert hard(old) == {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "16",
        "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "4",
    }
    assert hard(old + b"  featureGates: {DRAExtendedResource: true}\n") == hard(west)
    assert hard(west)["requests.nvidia.com/gpu"] == "16"


def test_team_selected_by_cluster_labels_only() -> None:
    west = {d.ref.name for d in _plan("gpu-west").objects if d.ref.kind == "Namespace"}
    assert west == {"ml-research"}  # inference selects env=prod clusters only


def test_no_team_is_granted_anything_on_classes_or_slices() -> None:
    plan = _plan()
    roles = [d for d in plan.objects if d.ref.kind in ("Role", "ClusterRole")]
    namespaces = {d.ref.name for d in plan.objects if d.ref.kind == "Namespace"}
    assert namespaces and {d.ref.namespace for d in roles} == namespaces, "every team namespace has its Role"
    granted = {resource for d in roles for rule in d.obj["rules"] for resource in rule["resources"]}
    assert granted == {"resourceclaims", "resourceclaimtemplates"}  # never deviceclasses or resourceslices


def test_every_object_is_stamped_and_in_stage_order() -> None:
    plan = _plan()
    order = [stages.index(d.stage) for d in plan.objects]
    assert order == sorted(order)
    for d in plan.objects:
        meta = d.obj["metadata"]
        assert meta["labels"][ownership.MANAGED_BY] == "fleet"
        assert meta["labels"][ownership.CLUSTER_LABEL] == "gpu-east"
        assert meta["annotations"][ownership.REVISION] == "abc123"
        assert ":" in meta["annotations"][ownership.SOURCE]
        assert len(meta["annotations"][ownership.APPLIED]) == 20
    assert {d.stage.name for d in plan.objects} == {"namespaces", "classes", "tenancy", "claims"}
    names = ["namespaces", "operator", "classes", "tenancy", "pools", "claims", "maintenance"]
    assert [s.name for s in STAGES] == names


def test_fingerprint_ignores_the_revision_only() -> None:
    a = ownership.stamp(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}, cluster="c", revision="r1", source="f:1:1"
    )
    b = ownership.stamp(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}, cluster="c", revision="r2", source="f:1:1"
    )
    c = ownership.stamp(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": {"a": "b"}}},
        cluster="c",
        revision="r1",
        source="f:1:1",
    )
    applied = ownership.APPLIED
    assert a["metadata"]["annotations"][applied] == b["metadata"]["annotations"][applied]
    assert a["metadata"]["annotations"][applied] != c["metadata"]["annotations"][applied]


def test_pools_become_rules_and_node_applies() -> None:
    plan = _plan()
    h100 = next(p for p in plan.pools if p.name == "h100")
    node = {"metadata": {"name": "n1", "labels": dict(h100.selector)}, "spec": {}}
    other = {"metadata": {"name": "n2", "labels": {}}, "spec": {}}
    [d] = plans.pool_objects(plan.pools, nodes=[node, other])
    assert d.ref.name == "n1" and d.stage.name == "pools" and d.field_manager == ownership.POOL_MANAGER
    assert d.obj["metadata"]["labels"][ownership.POOL_LABEL] == "h100"
    assert set(h100.labels.items()) <= set(d.obj["metadata"]["labels"].items())
    assert plans.release(d.ref) == {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


def test_the_most_specific_drift_policy_wins() -> None:
    from fleet.engine.renders import drift_policy
    from fleet.manifests import kinds

    defaults = kinds.FleetDefaults.model_validate(
        {"driftPolicy": "report", "driftPolicyByKind": {"DeviceClass": "ignore"}}
    )
    team = kinds.TeamSpec.model_validate(
        {
            "namespaces": ["ml"],
            "owners": [{"kind": "Group", "name": "ml"}],
            "deviceClasses": ["gpu"],
            "driftPolicy": "enforce",
            "driftPolicyByKind": {"RoleBinding": "report"},
        }
    )
    assert drift_policy("DeviceClass", team=None, defaults=defaults) == "ignore"
    assert drift_policy("Namespace", team=None, defaults=defaults) == "report"
    assert drift_policy("Role", team=team, defaults=defaults) == "enforce"
    assert drift_policy("RoleBinding", team=team, defaults=defaults) == "report"
    assert (
        drift_policy(
            "Role",
            team=kinds.TeamSpec.model_validate({**team.model_dump(by_alias=True), "driftPolicy": None}),
            defaults=defaults,
        )
        == "report"
    )


def test_a_copied_object_carries_every_slot_and_what_was_computed() -> None:
    """``Desired.copied`` writes each slot out by hand (for speed): a slot added later must be copied too."""
    import pickle

    for d in _plan().objects:
        assert d.ref and d.applied and d.order and d.leaves  # computed once, then carried
        same = d.copied()
        assert all(getattr(same, name) is getattr(d, name) for name in plans.Desired.__slots__)
        other = d.copied(revision="def456", drift="report")
        assert other.revision == "def456" and other.drift == "report" and other.ref is d.ref
        assert other.obj == renders.carried(d, revision="def456").obj
        # the leaves carry over only between two set revisions (the annotation is in both)
        assert (other.leaves is d.leaves) == bool(d.revision)
        assert other.leaves == frozenset(plans.normalizations.desired_leaves(other.obj))
        unset = d.copied(revision="")
        assert unset.leaves == frozenset(plans.normalizations.desired_leaves(unset.obj))
        back = pickle.loads(pickle.dumps(other))  # the plan store pickles plans
        assert back == other and back.ref == other.ref and back.drift == "report"


def test_a_rendered_objects_metadata_is_a_deep_copy_of_the_manifests() -> None:
    """``stamp`` writes into the render's metadata: nothing of it may be the manifest's own."""
    metadata = {"name": "a", "labels": {"x": "1"}, "ownerReferences": [{"uid": "u", "list": [{"k": None}]}], "n": 1.5}
    copied = renders._plain_copy(metadata)
    assert copied == metadata and copied is not metadata
    assert copied["labels"] is not metadata["labels"]
    assert copied["ownerReferences"][0]["list"][0] is not metadata["ownerReferences"][0]["list"][0]
