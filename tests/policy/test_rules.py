"""One test (or more) per policy rule, on the example repository with one change each."""

from __future__ import annotations

from fleet.engine import ownership
from fleet.manifests import Finding, load_revision
from fleet.policy import MAX_EXPRESSION_BYTES, check, structures
from tests.manifests.repos import example_files, only, rules, template, yaml


def findings_with(changes: dict[str, bytes | None]) -> list[Finding]:
    files = example_files()
    for path, content in changes.items():
        if content is None:
            del files[path]
        else:
            files[path] = content
    return check(load_revision(files))


def test_example_repository_is_clean() -> None:
    assert check(load_revision(example_files())) == []


def test_team_namespace_writing_into_another_teams_namespace() -> None:
    finding = only(findings_with({"teams/ml-research/t.yaml": template(namespace="inference")}), "team-namespace")
    assert (
        finding.message == "team 'ml-research' cannot write into namespace 'inference' (it belongs to team 'inference')"
    )
    assert (finding.location.file, finding.location.line) == ("teams/ml-research/t.yaml", 5)
    assert finding.hint == "use one of the team's namespaces: ml-research"


def test_team_namespace_missing() -> None:
    text = template().replace(b"  namespace: ml-research\n", b"")
    assert "has no namespace" in only(findings_with({"teams/ml-research/t.yaml": text}), "team-namespace").message


def test_namespace_shared_by_two_teams() -> None:
    team = example_files()["teams/inference/team.yaml"].replace(
        b"[inference, inference-canary]", b"[inference, ml-research]"
    )
    [finding] = [f for f in findings_with({"teams/inference/team.yaml": team}) if "already belongs" in f.message]
    assert finding.message == "namespace 'ml-research' already belongs to team 'inference'"
    assert str(finding.location) == "teams/ml-research/team.yaml:7:16"


def test_cluster_role_in_a_team_folder() -> None:
    role = yaml("""
        apiVersion: rbac.authorization.k8s.io/v1
        kind: ClusterRole
        metadata: {name: admin-all}
        rules: []
    """)
    finding = only(findings_with({"teams/ml-research/role.yaml": role}), "team-cluster-scoped")
    assert finding.location.file == "teams/ml-research/role.yaml"


def test_device_class_in_a_team_folder() -> None:
    dc = example_files()["deviceclasses/gpu.nvidia.com.yaml"].replace(b"name: gpu.nvidia.com", b"name: mine")
    finding = only(findings_with({"teams/ml-research/dc.yaml": dc}), "team-cluster-scoped")
    assert "deviceclasses/" in finding.hint


def test_device_class_outside_deviceclasses() -> None:
    dc = example_files()["deviceclasses/gpu.nvidia.com.yaml"].replace(b"name: gpu.nvidia.com", b"name: mine")
    assert (
        only(findings_with({"pools/dc.yaml": dc}), "deviceclass-location").hint == "move it to deviceclasses/mine.yaml"
    )


def test_other_kinds_in_a_team_folder_and_elsewhere() -> None:
    pod = yaml("""
        apiVersion: v1
        kind: Pod
        metadata: {name: p, namespace: ml-research}
    """)
    found = findings_with({"teams/ml-research/pod.yaml": pod, "pools/pod.yaml": pod.replace(b"name: p,", b"name: q,")})
    assert only(found, "team-kind").location.file == "teams/ml-research/pod.yaml"
    assert only(found, "unsupported-kind").location.file == "pools/pod.yaml"


def test_claim_outside_team_folder_and_team_folder_without_team() -> None:
    found = findings_with({"claims/t.yaml": template(), "teams/ghost/t.yaml": template(name="u")})
    assert only(found, "claim-location").location.file == "claims/t.yaml"
    assert "teams/ghost/ has no team.yaml" in only(found, "team-folder").message


def test_team_name_must_match_folder() -> None:
    team = example_files()["teams/inference/team.yaml"].replace(b"name: inference\n", b"name: serving\n")
    assert (
        "must be teams/serving/team.yaml"
        in only(findings_with({"teams/inference/team.yaml": team}), "team-folder").message
    )


def test_team_device_class_not_allowed() -> None:
    text = template(namespace="inference").replace(b"gpu.nvidia.com", b"mig.nvidia.com")
    finding = only(findings_with({"teams/inference/t.yaml": text}), "team-device-class")
    assert finding.message == "request 'gpu': team 'inference' may not use DeviceClass 'mig.nvidia.com'"
    assert finding.location.line == 12
    assert finding.cluster == "gpu-east"  # the inference team runs on env=prod clusters only


def test_unknown_device_class() -> None:
    text = template().replace(b"gpu.nvidia.com", b"gpu.nvidia.co")
    assert only(findings_with({"teams/ml-research/t.yaml": text}), "unknown-device-class").location.line == 12


def test_quota_single_request_over_quota() -> None:
    found = findings_with(
        {
            "teams/ml-research/t.yaml": template(
                request="""
                          count: 17
    """
            )
        }
    )
    [finding] = [f for f in found if f.rule == "team-quota" and f.location.file == "teams/ml-research/t.yaml"]
    assert finding.message == "request 'gpu' asks for 17 gpu.nvidia.com devices, over team 'ml-research''s quota of 16"
    assert finding.location.line == 13


def test_quota_sum_over_templates() -> None:
    # ml-research already requests 1+1+1+2 = 5 gpu.nvidia.com; 12 more is 17 > 16
    finding = only(
        findings_with(
            {
                "teams/ml-research/t.yaml": template(
                    request="""
                          count: 12
    """
                )
            }
        ),
        "team-quota",
    )
    assert "request 17 gpu.nvidia.com devices together, over the quota of 16" in finding.message
    assert (finding.location.file, finding.location.line) == ("teams/ml-research/team.yaml", 13)


def test_quota_from_overlay_is_per_cluster() -> None:
    # inference: quota 8 in the base, 32 on gpu-east (its only cluster); 3 + 20 fits 32
    found = findings_with(
        {
            "teams/inference/t.yaml": template(
                namespace="inference",
                request="""
                          count: 20
    """,
            )
        }
    )
    assert "team-quota" not in rules(found)


def test_quota_refuses_allocation_mode_all() -> None:
    finding = only(
        findings_with(
            {
                "teams/ml-research/t.yaml": template(
                    request="""
                          allocationMode: All
    """
                )
            }
        ),
        "team-quota",
    )
    assert "allocationMode All" in finding.message


def test_first_available_counts_the_largest_alternative() -> None:
    text = yaml("""
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaim
        metadata: {name: c, namespace: ml-research}
        spec:
          devices:
            requests:
            - name: gpu
              firstAvailable:
              - {name: many, deviceClassName: gpu.nvidia.com, count: 12}
              - {name: one, deviceClassName: gpu.nvidia.com}
    """)
    assert (
        "request 17 gpu.nvidia.com devices together"
        in only(findings_with({"teams/ml-research/c.yaml": text}), "team-quota").message
    )


def test_dns_label_names() -> None:
    found = findings_with({"teams/ml-research/t.yaml": template(name="Big_GPU")})
    finding = only(found, "dns-label")
    assert finding.message == "'Big_GPU' is not a valid DNS label (RFC 1123)"
    assert finding.location.line == 4


def test_duplicate_object_in_two_files() -> None:
    copy = example_files()["teams/ml-research/single-gpu.yaml"]
    finding = only(findings_with({"teams/ml-research/copy.yaml": copy}), "duplicate-object")
    assert "ResourceClaimTemplate/ml-research/single-gpu is already defined at teams/ml-research/" in finding.message


def test_cel_expression_over_10_kib() -> None:
    long = "device.driver == 'gpu.nvidia.com' && " * (MAX_EXPRESSION_BYTES // 30) + "true"
    text = template(
        request=f"""
                          selectors:
                          - cel:
                              expression: "{long}"
    """
    )
    finding = only(findings_with({"teams/ml-research/t.yaml": text}), "cel-too-long")
    assert finding.location.line == 15
    assert "over the API limit of 10240" in finding.message


def test_operator_values_must_follow_the_gpucluster_path() -> None:
    operator = example_files()["operator/gpu-operator.yaml"]
    operator = operator.replace(b"deployCR: false", b"deployCR: true").replace(
        b"version: v26.7.0", b"version: v25.10.0"
    )
    found = [f for f in findings_with({"operator/gpu-operator.yaml": operator}) if f.rule == "operator-values"]
    assert [f.message for f in found] == [
        "GPU Operator v25.10.0 has no GPUCluster (DRA) install path",
        "installPath gpuCluster needs clusterPolicy.deployCR=false, but it is True",
    ]
    assert "helm --set clusterPolicy.deployCR=false" in found[1].hint


def test_operator_values_preinstalled_driver() -> None:
    operator = example_files()["operator/gpu-operator.yaml"].replace(
        b"installPath: gpuCluster", b"installPath: preinstalledDriver"
    )
    finding = only(findings_with({"operator/gpu-operator.yaml": operator}), "operator-values")
    assert finding.message == "installPath preinstalledDriver needs driver.enabled=false, but it is not set"


def test_operator_values_broken_by_one_overlay_names_that_cluster() -> None:
    west = example_files()["overlays/gpu-west/overlay.yaml"] + b"    clusterPolicy:\n      deployCR: true\n"
    finding = only(findings_with({"overlays/gpu-west/overlay.yaml": west}), "operator-values")
    assert finding.cluster == "gpu-west"
    assert finding.location.file == "overlays/gpu-west/overlay.yaml"


def test_fleet_and_clusters_reference_each_other() -> None:
    fleet = example_files()["fleet.yaml"].replace(b"  - gpu-west\n", b"  - gpu-north\n")
    found = [f.message for f in findings_with({"fleet.yaml": fleet}) if f.rule == "cluster-reference"]
    assert found == [
        "Cluster 'gpu-west' is not listed in the Fleet",
        "Fleet lists cluster 'gpu-north' but no valid Cluster 'gpu-north' was loaded (clusters/gpu-north.yaml)",
    ]


def test_missing_fleet() -> None:
    finding = only(findings_with({"fleet.yaml": None}), "fleet-root")
    assert finding.message == "the repository has no Fleet (fleet.yaml)"
    assert "is this the root of a fleet repository?" in finding.hint


def test_selector_naming_an_unknown_cluster() -> None:
    pool = example_files()["pools/h200.yaml"].replace(b"names: [gpu-east]", b"names: [gpu-eats]")
    assert only(findings_with({"pools/h200.yaml": pool}), "cluster-reference").message == "no Cluster named 'gpu-eats'"


def test_selector_matching_no_cluster_is_a_warning() -> None:
    team = example_files()["teams/inference/team.yaml"].replace(b"env: prod", b"env: production")
    finding = only(findings_with({"teams/inference/team.yaml": team}), "cluster-reference")
    assert finding.severity == "warning"
    assert finding.message == "Team 'inference' selects no cluster, so it is never applied"
    assert finding.location.line == 7


def test_a_revision_with_errors_is_reported_whole() -> None:
    found = findings_with(
        {
            "teams/ml-research/a.yaml": template(name="a", namespace="inference"),
            "teams/ml-research/b.yaml": template(name="Bad_Name"),
            "teams/ml-research/c.yaml": b"kind: [",
            "clusters/gpu-west.yaml": example_files()["clusters/gpu-west.yaml"].replace(
                b"kubernetesVersion", b"kubernetesVersio"
            ),
        }
    )
    assert {"team-namespace", "dns-label", "yaml-syntax", "schema"} <= set(rules(found))


def test_pools_selecting_the_same_nodes_overlap() -> None:
    h200 = example_files()["pools/h200.yaml"].replace(b"p5en.48xlarge", b"p5.48xlarge")
    finding = only(findings_with({"pools/h200.yaml": h200}), "pool-overlap")
    assert finding.message.startswith("every node pool 'h200' selects is also selected by pool 'h100'")
    assert finding.cluster == "gpu-east"  # the two pools share only that cluster


def test_pool_memory_and_capacity_requests_are_quantities() -> None:
    pool = example_files()["pools/h100.yaml"].replace(b"memory: 81559Mi", b"memory: 80 GiB")
    text = template(request="capacity:\n  requests:\n    gpu.nvidia.com/memory: lots")
    found = findings_with({"pools/h100.yaml": pool, "teams/ml-research/t.yaml": text})
    assert sorted((f.location.file, f.rule) for f in found) == [
        ("pools/h100.yaml", "quantity"),
        ("teams/ml-research/t.yaml", "quantity"),
    ]


def test_cluster_without_dra_v1_is_refused() -> None:
    cluster = example_files()["clusters/gpu-west.yaml"].replace(b'"1.36"', b'"1.33"')
    finding = only(findings_with({"clusters/gpu-west.yaml": cluster}), "cluster-version")
    assert finding.message == "Kubernetes 1.33 does not serve resource.k8s.io/v1 (GA in 1.34)"


def test_mig_profiles_and_service_account_owners_are_checked() -> None:
    pool = example_files()["pools/a100-mig.yaml"].replace(b"3g.40gb: 2", b"3g-40gb: 2")
    team = example_files()["teams/inference/team.yaml"].replace(b"kind: Group", b"kind: ServiceAccount")
    found = findings_with({"pools/a100-mig.yaml": pool, "teams/inference/team.yaml": team})
    messages = sorted(f.message for f in found if f.rule == "schema")
    assert messages == [
        "spec.mig.profiles.3g-40gb (key): String should match pattern '^([0-9]+c\\.)?[0-9]+g\\.[0-9]+gb(\\+me)?$'",
        "spec.owners[0]: namespace is required for a ServiceAccount and only for it",
    ]


def test_a_team_without_owners_is_valid_with_a_warning() -> None:
    """``owners: []`` (what ``fleetctl import`` writes when it finds none) grants nobody the team's
    claims: a warning naming what to fill in, not an error; leaving the field out is still one."""
    team = example_files()["teams/inference/team.yaml"]
    start = team.index(b"  owners:\n")
    bare = team[:start] + b"  owners: []\n" + team[team.index(b"  deviceClasses:") :]
    finding = only(findings_with({"teams/inference/team.yaml": bare}), "team-owners")
    assert finding.severity == "warning"
    assert finding.message == "Team 'inference' has no owners: nobody but fleet may make claims in its namespaces"
    assert finding.location.file == "teams/inference/team.yaml"
    assert "spec.owners" in finding.hint
    missing = team[:start] + team[team.index(b"  deviceClasses:") :]
    refused = findings_with({"teams/inference/team.yaml": missing})
    assert "missing required field 'spec.owners'" in [f.message for f in refused if f.rule == "schema"]


def test_team_in_a_reserved_namespace() -> None:
    team = example_files()["teams/ml-research/team.yaml"]
    for namespace, why in (
        (b"kube-system", "belongs to Kubernetes"),
        (b"default", "belongs to Kubernetes"),
        (b"fleet-system", "fleet's own"),
        (b"gpu-operator", "the GPU Operator's"),
    ):
        found = findings_with({"teams/ml-research/team.yaml": team.replace(b"[ml-research]", b"[" + namespace + b"]")})
        finding = only(found, "reserved-namespace")
        assert why in finding.message and namespace.decode() in finding.message
        assert (finding.location.file, finding.location.line) == ("teams/ml-research/team.yaml", 7)


def test_adopt_namespaces_names_only_the_teams_namespaces() -> None:
    team = example_files()["teams/ml-research/team.yaml"]
    assert findings_with({"teams/ml-research/team.yaml": team + b"  adoptNamespaces: true\n"}) == []
    found = findings_with({"teams/ml-research/team.yaml": team + b"  adoptNamespaces: [inference]\n"})
    assert "inference, not in namespaces" in only(found, "schema").message


def test_adopt_annotation_says_true_or_nothing() -> None:
    dc = example_files()["deviceclasses/gpu.nvidia.com.yaml"]
    assert b'fleet.gpufleet.dev/adopt: "true"' in dc
    finding = only(
        findings_with({"deviceclasses/gpu.nvidia.com.yaml": dc.replace(b'adopt: "true"', b'adopt: "yes"')}),
        "adopt-annotation",
    )
    assert "'yes'" in finding.message and finding.location.line == 9
    assert structures.ADOPT == ownership.ADOPT


def test_take_ownership_and_drift_annotations_say_a_value_fleet_understands() -> None:
    dc = example_files()["deviceclasses/gpu.nvidia.com.yaml"]
    for annotation, rule, hint in (
        (b'fleet.gpufleet.dev/take-ownership: "yes"', "take-ownership-annotation", 'take-ownership: "true"'),
        (b"fleet.gpufleet.dev/drift: freeze", "drift-annotation", "report"),
    ):
        written = dc.replace(
            b'    fleet.gpufleet.dev/adopt: "true"\n',
            b'    fleet.gpufleet.dev/adopt: "true"\n    ' + annotation + b"\n",
        )
        finding = only(findings_with({"deviceclasses/gpu.nvidia.com.yaml": written}), rule)
        assert finding.location.file == "deviceclasses/gpu.nvidia.com.yaml" and finding.location.line == 10
        assert annotation.split(b": ")[1].strip(b'"').decode() in finding.message and hint in finding.hint
    for good in (b'fleet.gpufleet.dev/take-ownership: "true"', b"fleet.gpufleet.dev/drift: report"):
        written = dc.replace(
            b'    fleet.gpufleet.dev/adopt: "true"\n', b'    fleet.gpufleet.dev/adopt: "true"\n    ' + good + b"\n"
        )
        assert findings_with({"deviceclasses/gpu.nvidia.com.yaml": written}) == []
    assert (structures.TAKE_OWNERSHIP, structures.DRIFT) == (ownership.TAKE_OWNERSHIP, ownership.DRIFT)
