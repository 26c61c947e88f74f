"""fleet deletes only what it created, adopts only when told, and never deletes a claim in use (sandbox).

Each test is a scenario of issue 7 as a user meets it: someone else's object inside
a team namespace, a namespace that existed before fleet, a template adopted by
annotation, a claim a running pod holds, two pools that pick the same live node.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleet import engine, kube
from fleet.engine import blockers, ledgers, ownership
from fleet.sandbox import Sandbox, credentials
from fleetctl import cli
from tests.apply.conftest import Engine, actions
from tests.apply.repos import Repo
from tests.conftest import Kubectl, gpu_pod

pytestmark = pytest.mark.sandbox


def _namespace(fleet: Engine, name: str) -> dict[str, object]:
    return fleet.run(lambda c: c.get(kube.Ref("v1", "Namespace", "", name)))


def _ledger(fleet: Engine, repo: Repo) -> ledgers.Ledger:
    return fleet.run(lambda c: ledgers.load(client=c, cluster=repo.cluster))


def _fleet_marks(obj: dict[str, object]) -> list[str]:
    meta = obj["metadata"]
    assert isinstance(meta, dict)
    marks = {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}
    return sorted(
        k for k, v in marks.items() if k.startswith(ownership.DOMAIN) or (k, v) == (ownership.MANAGED_BY, "fleet")
    )


@pytest.fixture()
def cleanup(kubectl: Kubectl) -> Iterator[list[str]]:
    """Namespaces a test created by hand, deleted afterwards (fleet does not delete them: that is the point)."""
    names: list[str] = []
    yield names
    for name in names:
        kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_configmap_someone_put_in_a_team_namespace_survives_team_removal(
    fleet: Engine, repo: Repo, kubectl: Kubectl
) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    fleet.apply()
    ns = repo.ns("ml")
    kubectl("create", "configmap", "notes", "-n", ns, "--from-literal=owner=alice")

    repo.teams.clear()
    [previewed] = fleet.diff().failed
    assert previewed.refused and "ConfigMap notes" in previewed.error, "diff shows the block before apply"
    pruned = fleet.apply(prune=True)
    [blocked] = pruned.failed
    assert str(blocked.ref) == f"Namespace {ns}"
    assert "ConfigMap notes" in blocked.error and "fleet did not create" in blocked.error
    assert actions(pruned)[f"Role {ns}/fleet-team-claims"] == "deleted", "what fleet put there goes"
    assert _namespace(fleet, ns)["status"] == {"phase": "Active"}
    assert kubectl("get", "configmap", "notes", "-n", ns).returncode == 0
    assert f"/Namespace//{ns}" in _ledger(fleet, repo).entries, "still fleet's to prune once it is empty"

    kubectl("delete", "configmap", "notes", "-n", ns)
    previewed_again = fleet.diff()
    assert actions(previewed_again)[f"Namespace {ns}"] == "deleted" and not previewed_again.failed, (
        "the preview and the prune ask one guard: both now find the namespace empty"
    )
    again = fleet.apply(prune=True)
    assert actions(again)[f"Namespace {ns}"] == "deleted" and not again.failed


def test_team_naming_an_existing_namespace_is_a_conflict_and_nothing_is_written(
    fleet: Engine, repo: Repo, kubectl: Kubectl, cleanup: list[str]
) -> None:
    ns = repo.ns("legacy")
    cleanup.append(ns)
    kubectl("create", "namespace", ns)
    kubectl("label", "namespace", ns, "app.kubernetes.io/managed-by=Helm")
    repo.team("ml", namespaces=["legacy"], group="ml-research")

    preview = fleet.diff()
    [conflict] = preview.failed
    assert str(conflict.ref) == f"Namespace {ns}"
    assert "kubectl-create" in conflict.error and "Helm" in conflict.error
    assert "teams/ml/team.yaml" in conflict.error and "adoptNamespaces" in conflict.error
    assert actions(preview)[f"Role {ns}/fleet-team-claims"] == "created", "the preview goes on past a refusal"

    result: list[engine.ChangeSet] = []
    writes = fleet.server_writes(lambda: result.append(fleet.apply()))
    assert [str(e.ref) for e in result[0].failed] == [f"Namespace {ns}"]
    assert writes == 0, "a conflict stops the run before any write"
    assert not _ledger(fleet, repo).exists
    assert _fleet_marks(_namespace(fleet, ns)) == []


def test_adopted_namespace_is_released_never_deleted(
    fleet: Engine, repo: Repo, kubectl: Kubectl, cleanup: list[str]
) -> None:
    ns = repo.ns("legacy")
    cleanup.append(ns)
    kubectl("create", "namespace", ns)
    kubectl("create", "configmap", "data", "-n", ns)
    repo.team("ml", namespaces=["legacy"], group="ml-research", adopt=True)

    applied = fleet.apply()
    assert not applied.failed and actions(applied)[f"Namespace {ns}"] == "configured"
    entries = _ledger(fleet, repo).entries
    assert entries[f"/Namespace//{ns}"] == ledgers.Entry("v1", ledgers.ADOPTED)
    assert entries[f"rbac.authorization.k8s.io/Role/{ns}/fleet-team-claims"].origin == ledgers.CREATED
    assert _fleet_marks(_namespace(fleet, ns)) != []

    repo.teams.clear()
    pruned = fleet.apply(prune=True)
    assert not pruned.failed
    entry = next(e for e in pruned.entries if str(e.ref) == f"Namespace {ns}")
    assert entry.release and "released" in entry.reason
    live = _namespace(fleet, ns)
    assert live["status"] == {"phase": "Active"}
    assert _fleet_marks(live) == [], "fleet's labels and annotations are given back"
    assert kubectl("get", "configmap", "data", "-n", ns).returncode == 0
    assert f"/Namespace//{ns}" not in _ledger(fleet, repo).entries


def test_existing_template_is_adopted_only_when_annotated(fleet: Engine, repo: Repo) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    fleet.apply()
    ns = repo.ns("ml")
    ref = kube.Ref("resource.k8s.io/v1", "ResourceClaimTemplate", ns, "shared")
    by_hand = {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "metadata": {"name": ref.name, "namespace": ns},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": repo.device_class_name, "count": 1}}]
                }
            }
        },
    }
    fleet.run(lambda c: c.apply(by_hand, field_manager="notebook-tool"))

    repo.claim_template("ml", "shared")
    refused = fleet.apply()
    [conflict] = refused.failed
    assert conflict.ref == ref and "notebook-tool" in conflict.error and ownership.ADOPT in conflict.error

    repo.claim_template("ml", "shared", adopt=True)
    adopted = fleet.apply()
    assert not adopted.failed
    assert _ledger(fleet, repo).entries[ref.key].origin == ledgers.ADOPTED
    assert ownership.managed(fleet.run(lambda c: c.get(ref)))

    del repo.claims["ml/shared"]
    released = fleet.apply(prune=True)
    assert not released.failed and next(e for e in released.entries if e.ref == ref).release
    live = fleet.run(lambda c: c.get(ref))
    [request] = live["spec"]["spec"]["devices"]["requests"]
    assert _fleet_marks(live) == [] and request["exactly"]["count"] == 1, "released with its content"
    assert all(f["manager"] != ownership.MANAGER for f in live["metadata"].get("managedFields") or ())


def test_claim_in_use_is_neither_replaced_nor_pruned(fleet: Engine, repo: Repo, kubectl: Kubectl) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim("ml", "shared-gpu")
    fleet.apply()
    ns = repo.ns("ml")
    ref = kube.Ref("resource.k8s.io/v1", "ResourceClaim", ns, "shared-gpu")
    gpu_pod(kubectl, ns, name="trainer", claim="shared-gpu")
    try:
        kubectl("wait", "-n", ns, "pod/trainer", "--for=jsonpath={.status.phase}=Running", "--timeout=60s")
        uid = fleet.run(lambda c: c.get(ref))["metadata"]["uid"]

        repo.claim("ml", "shared-gpu", count=2)  # spec is immutable: this would replace the claim
        replaced = fleet.apply()
        [refused] = replaced.failed
        assert refused.ref == ref and "pod trainer" in refused.error and "in use" in refused.error
        assert fleet.run(lambda c: c.get(ref))["metadata"]["uid"] == uid

        del repo.claims["ml/shared-gpu"]
        pruned = fleet.apply(prune=True)
        [refused] = pruned.failed
        assert refused.ref == ref and "pod trainer" in refused.error
        assert fleet.run(lambda c: c.get(ref))["metadata"]["uid"] == uid
        assert ref.key in _ledger(fleet, repo).entries
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)


def test_pools_that_pick_the_same_live_node_write_nothing(fleet: Engine, repo: Repo) -> None:
    label = f"t{repo.id}.example.com/pool"
    repo.pool("l4", selector={"sandbox.fleet.gpufleet.dev/pool": "l4x4"}, labels={label: "l4"}, gpus=4)
    repo.pool("first-l4", selector={"kubernetes.io/hostname": "l4x4-01"}, labels={label: "first"}, gpus=4)

    preview = fleet.diff()
    [overlap] = preview.failed
    assert str(overlap.ref) == "Node l4x4-01"
    assert "'first-l4'" in overlap.error and "'l4'" in overlap.error and "pools/" in overlap.error

    applied = fleet.apply()
    assert [str(e.ref) for e in applied.failed] == ["Node l4x4-01"]
    assert fleet.last_client is not None
    assert fleet.last_client.counts.writes == 0, "nodes' heartbeats make the server's count useless here"
    node = fleet.run(lambda c: c.get(kube.Ref("v1", "Node", "", "l4x4-01")))
    assert label not in node["metadata"]["labels"]


def test_cli_lists_the_conflict_diff_exits_1_and_apply_writes_nothing(
    sandbox: Sandbox,
    fleet: Engine,
    repo: Repo,
    kubectl: Kubectl,
    cleanup: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    ns = repo.ns("legacy")
    cleanup.append(ns)
    kubectl("create", "namespace", ns)
    repo.team("ml", namespaces=["legacy"], group="ml-research")
    path = str(repo.write())

    assert cli.run(["diff", path, "--cluster", repo.cluster]) == 1, "a refused change is a difference, not an error"
    out = capsys.readouterr().out
    assert f"error: Namespace {ns}: already exists in cluster {repo.cluster}" in out
    assert 'field manager "kubectl-create"' in out and "adoptNamespaces" in out
    assert "Traceback" not in out

    assert cli.run(["apply", path, "--cluster", repo.cluster]) == 1
    assert f"Namespace {ns}: already exists" in capsys.readouterr().out
    assert not _ledger(fleet, repo).exists, "nothing written, not even the ledger"
    assert kubectl("get", "role", "-n", ns, "-o", "name").stdout.strip() == ""


def test_a_namespace_fleet_may_not_list_everything_in_counts_as_not_empty(fleet: Engine, namespace: str) -> None:
    async def as_alice(c: kube.Client) -> list[str]:
        kinds = await blockers.namespaced_kinds(client=c)  # discovery is open to every user
        return await blockers.foreign_objects(client=c, namespace=namespace, ours=set(), kinds=kinds)

    found = fleet.run(as_alice, context=f"alice@{credentials.CLUSTER}")
    assert found and all("cannot list them" in f for f in found), "fail closed: unknown is not empty"
    assert any(f.startswith("secrets (cannot list them") for f in found)
