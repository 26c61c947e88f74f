"""Disruptive changes held back on a real cluster: the window, running GPU jobs, their deadline, a drain.

A pod holds a ResourceClaim the real scheduler allocated on a KWOK GPU node. Tightening the
DeviceClass past that device is disruptive (``fleet.engine.disruptions``); a team template change
beside it is safe. ``fleetctl apply`` applies the safe part at once and holds the disruptive one:
for the maintenance window (an emergency skips it), for the pod (policy ``wait``, reported overdue
after the deadline), or while fleet drains the node through the Eviction API (policy ``drain``, a
PodDisruptionBudget holding it until it is gone). Once the pod is gone the change goes. A held prune
drains as a held write does, and ``maxUnavailable`` bounds the nodes being drained across runs.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from fleet.engine import drains
from fleetctl import cli
from tests import waits
from tests.apply.repos import Repo
from tests.conftest import Kubectl, gpu_pod

pytestmark = pytest.mark.sandbox


def closed_window() -> dict[str, Any]:
    """A daily one-hour window that opens 12 hours from now (UTC): closed for the whole test."""
    opens = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=12)
    return {"windows": [{"schedule": f"{opens.minute} {opens.hour} * * *", "duration": "1h", "timeZone": "UTC"}]}


def holding(kubectl: Kubectl, repo: Repo, ns: str, *, labels: dict[str, str] | None = None) -> tuple[str, str]:
    """Apply the team with claim ``held``, run pod ``trainer`` on it; (node, uuid) of the allocated device."""
    assert cli.run(["apply", str(repo.write()), "--cluster", repo.cluster]) == 0
    return trainer(kubectl, ns, labels=labels)


def trainer(kubectl: Kubectl, ns: str, *, labels: dict[str, str] | None = None) -> tuple[str, str]:
    """Run pod ``trainer`` on the applied claim ``held``; (node, uuid) of the device it was allocated."""
    gpu_pod(kubectl, ns, name="trainer", claim="held")
    if labels:
        kubectl("label", "-n", ns, "pod/trainer", *(f"{k}={v}" for k, v in labels.items()))
    kubectl("wait", "-n", ns, "pod/trainer", "--for=jsonpath={.status.phase}=Running", "--timeout=90s")
    return device_of(kubectl, ns, "held")


def device_of(kubectl: Kubectl, ns: str, claim: str) -> tuple[str, str]:
    """(node, uuid) of the device the real scheduler allocated to ``claim``."""
    got = json.loads(kubectl("get", "resourceclaim", "-n", ns, claim, "-o", "json").stdout)
    [result] = got["status"]["allocation"]["devices"]["results"]
    slices = json.loads(kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    [uuid] = [
        d["attributes"]["uuid"]["string"]
        for s in slices
        if s["spec"]["pool"]["name"] == result["pool"] and s["spec"]["driver"] == result["driver"]
        for d in s["spec"].get("devices") or ()
        if d["name"] == result["device"]
    ]
    return str(result["pool"]), str(uuid)


def entries(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    return {e["object"]["kind"]: e for e in json.loads(capsys.readouterr().out)["entries"]}


def live_selector(kubectl: Kubectl, repo: Repo) -> str:
    obj = json.loads(kubectl("get", "deviceclass", repo.device_class_name, "-o", "json").stdout)
    return str(obj["spec"]["selectors"][0]["cel"]["expression"])


def template_count(kubectl: Kubectl, ns: str) -> int:
    obj = json.loads(kubectl("get", "resourceclaimtemplate", "-n", ns, "one-gpu", "-o", "json").stdout)
    return int(obj["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"])


def released(kubectl: Kubectl, ns: str) -> bool:
    claim = json.loads(kubectl("get", "resourceclaim", "-n", ns, "held", "-o", "json").stdout)
    return not (claim.get("status") or {}).get("allocation")


def budget(kubectl: Kubectl, ns: str, app: str) -> None:
    """A PodDisruptionBudget that forbids evicting the pods labelled ``app`` (once it counts them)."""
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": app, "namespace": ns},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(pdb))

    def counted() -> bool:
        status = json.loads(kubectl("get", "pdb", "-n", ns, app, "-o", "json").stdout).get("status", {})
        return bool(status.get("currentHealthy") == 1)

    waits.wait_for(counted, within=30, what="the budget counts the pod")


def entry_of(capsys: pytest.CaptureFixture[str], kind: str, name: str) -> dict[str, Any]:
    [found] = [
        e
        for e in json.loads(capsys.readouterr().out)["entries"]
        if e["object"]["kind"] == kind and e["object"]["name"] == name
    ]
    return found


def gone(kubectl: Kubectl, ns: str, pod: str, claim: str) -> None:
    """Wait for an evicted ``pod`` to be gone and its ``claim`` deallocated."""
    waits.wait_for(
        lambda: kubectl("get", "-n", ns, f"pod/{pod}", check=False).returncode != 0, within=60, what=f"{pod} gone"
    )
    waits.wait_for(
        lambda: (
            not json.loads(kubectl("get", "resourceclaim", "-n", ns, claim, "-o", "json").stdout)
            .get("status", {})
            .get("allocation")
        ),
        within=60,
        what=f"claim {claim} deallocated",
    )


def cordoned_for(kubectl: Kubectl, key: str) -> set[str]:
    """The nodes fleet cordoned for the change ``key``."""
    nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return {
        n["metadata"]["name"]
        for n in nodes
        if n["spec"].get("unschedulable") and (n["metadata"].get("annotations") or {}).get(drains.DRAINED_FOR) == key
    }


def test_the_safe_part_goes_at_once_the_disruptive_part_waits_for_the_window_then_for_the_job(
    team: Repo, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, ns = team, team.ns("ml")
    repo.cluster_spec = {"maintenance": closed_window()}
    node, uuid = holding(kubectl, repo, ns)
    try:
        before = live_selector(kubectl, repo)
        repo.device_class_expression = f"device.attributes['gpu.nvidia.com'].uuid != '{uuid}'"
        repo.claim_template("ml", "one-gpu", count=2)
        path = str(repo.write())
        capsys.readouterr()

        assert cli.run(["diff", path, "--cluster", repo.cluster, "-o", "json"]) == 1
        held = entries(capsys)["DeviceClass"]
        assert held["action"] == "skipped" and held["waiting"]["on"] == "window"
        assert held["waiting"]["intended"] == "configured" and held["waiting"]["until"]
        assert cli.run(["diff", path, "--cluster", repo.cluster, "-o", "markdown"]) == 1
        comment = capsys.readouterr().out
        assert "<b>configured</b> ⚠️ disruptive ⏸️ waits" in comment
        [said] = [x for x in comment.splitlines() if x.startswith("- ⚠️ ") and "DeviceClass" in x]
        assert "**waits for the maintenance window (opens " in said and f"{ns}/held" in said

        assert cli.run(["apply", path, "--cluster", repo.cluster]) == 0
        out = capsys.readouterr().out
        [line] = [x for x in out.splitlines() if x.startswith("waits: ")]
        assert f"DeviceClass {repo.device_class_name}" in line and "waits for the maintenance window (opens " in line
        assert live_selector(kubectl, repo) == before, "the disruptive change was not applied"
        assert template_count(kubectl, ns) == 2, "the safe change was"

        # An emergency skips the window, not the job: now it waits for the pod holding the claim.
        assert cli.run(["apply", path, "--cluster", repo.cluster, "--emergency", "CVE-2026-0001", "-o", "json"]) == 0
        held = entries(capsys)["DeviceClass"]
        assert held["waiting"]["on"] == "claims"
        assert held["waiting"]["reason"] == f"1 allocated claim ({ns}/held) on node {node} to end (policy wait)"
        assert live_selector(kubectl, repo) == before

        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s")
        waits.wait_for(lambda: released(kubectl, ns), within=60, what="the claim deallocated once its pod is gone")
        assert cli.run(["apply", path, "--cluster", repo.cluster, "--emergency", "CVE-2026-0001", "-o", "json"]) == 0
        went = entries(capsys)["DeviceClass"]
        assert went["action"] == "configured" and "waiting" not in went
        assert live_selector(kubectl, repo) == repo.device_class_expression.replace("\\'", "'")
        # Outside the window, without the emergency, nothing is left to wait for.
        assert cli.run(["diff", path, "--cluster", repo.cluster]) == 0
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)


def test_policy_wait_reports_a_change_overdue_after_its_deadline_and_keeps_it_held(
    team: Repo, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, ns = team, team.ns("ml")
    repo.cluster_spec = {"disruption": {"policy": "wait", "deadline": "3s"}}
    _, uuid = holding(kubectl, repo, ns)
    try:
        before = live_selector(kubectl, repo)
        repo.device_class_expression = f"device.attributes['gpu.nvidia.com'].uuid != '{uuid}'"
        path = str(repo.write())
        capsys.readouterr()
        assert cli.run(["apply", path, "--cluster", repo.cluster, "-o", "json"]) == 0
        first = entries(capsys)["DeviceClass"]["waiting"]
        assert first["on"] == "claims" and not first["overdue"] and first["until"]
        since = first["since"]
        waits.wait_for(
            lambda: datetime.datetime.now(datetime.UTC) > datetime.datetime.fromisoformat(first["until"]),
            within=10,
            what="the deadline passes",
        )
        assert cli.run(["apply", path, "--cluster", repo.cluster, "-o", "json"]) == 0
        late = entries(capsys)["DeviceClass"]
        assert late["action"] == "skipped" and late["waiting"]["overdue"], "overdue, and still held"
        assert late["waiting"]["since"] == since, "the deadline counts from the first wait, kept in the ledger"
        assert late["reason"].endswith("(overdue)")
        assert live_selector(kubectl, repo) == before
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)


def test_drain_cordons_evicts_through_the_eviction_api_respects_a_budget_and_uncordons(
    team: Repo, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, ns = team, team.ns("ml")
    repo.cluster_spec = {"disruption": {"policy": "drain", "maxUnavailable": 1}}
    node, uuid = holding(kubectl, repo, ns, labels={"app": "trainer"})
    try:
        budget(kubectl, ns, "trainer")
        before = live_selector(kubectl, repo)
        repo.device_class_expression = f"device.attributes['gpu.nvidia.com'].uuid != '{uuid}'"
        path = str(repo.write())
        capsys.readouterr()

        assert cli.run(["apply", path, "--cluster", repo.cluster, "-o", "json"]) == 0
        held = entries(capsys)["DeviceClass"]
        assert held["waiting"]["on"] == "claims"
        assert f"draining node {node}: pod {ns}/trainer not evicted: " in held["reason"]
        assert "disruption budget" in held["reason"]
        live = json.loads(kubectl("get", "node", node, "-o", "json").stdout)
        assert live["spec"].get("unschedulable") is True
        assert (
            live["metadata"]["annotations"][drains.DRAINED_FOR]
            == f"resource.k8s.io/DeviceClass//{repo.device_class_name}"
        )
        assert kubectl("get", "-n", ns, "pod/trainer", "-o", "name").stdout.strip() == "pod/trainer", "budget held"
        assert live_selector(kubectl, repo) == before

        kubectl("delete", "pdb", "-n", ns, "trainer")
        assert cli.run(["apply", path, "--cluster", repo.cluster, "-o", "json"]) == 0
        assert f"pod {ns}/trainer evicted" in entries(capsys)["DeviceClass"]["reason"]
        waits.wait_for(
            lambda: kubectl("get", "-n", ns, "pod/trainer", check=False).returncode != 0,
            within=60,
            what="the evicted pod gone",
        )
        waits.wait_for(lambda: released(kubectl, ns), within=60, what="its claim deallocated")

        assert cli.run(["apply", path, "--cluster", repo.cluster, "-o", "json"]) == 0
        assert entries(capsys)["DeviceClass"]["action"] == "configured"
        live = json.loads(kubectl("get", "node", node, "-o", "json").stdout)
        assert not live["spec"].get("unschedulable"), "uncordoned once the change applied and every gate passed"
        assert drains.DRAINED_FOR not in live["metadata"].get("annotations", {})
    finally:
        kubectl("delete", "pdb", "-n", ns, "trainer", check=False)
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)
        kubectl("uncordon", node, check=False)


def test_removing_a_template_running_pods_use_waits_as_a_disruptive_write_does(
    team: Repo, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, ns = team, team.ns("ml")
    repo.cluster_spec = {"maintenance": closed_window()}
    assert cli.run(["apply", str(repo.write()), "--cluster", repo.cluster]) == 0
    gpu_pod(kubectl, ns, name="worker", template="one-gpu")
    try:
        kubectl("wait", "-n", ns, "pod/worker", "--for=jsonpath={.status.phase}=Running", "--timeout=90s")
        del repo.claims["ml/one-gpu"]
        path = str(repo.write())
        capsys.readouterr()
        assert cli.run(["apply", path, "--cluster", repo.cluster, "--prune", "-o", "json"]) == 0
        held = entries(capsys)["ResourceClaimTemplate"]
        assert held["action"] == "skipped" and held["waiting"]["on"] == "window"
        assert held["waiting"]["intended"] == "deleted"
        assert "removes a template 1 running pod(s) use" in held["reason"]
        assert kubectl("get", "resourceclaimtemplate", "-n", ns, "one-gpu", check=False).returncode == 0

        assert cli.run(["apply", path, "--cluster", repo.cluster, "--prune", "--emergency", "x", "-o", "json"]) == 0
        assert entries(capsys)["ResourceClaimTemplate"]["waiting"]["on"] == "claims"

        kubectl("delete", "-n", ns, "pod/worker", "--wait=true", "--timeout=60s")
        assert cli.run(["apply", path, "--cluster", repo.cluster, "--prune", "--emergency", "x", "-o", "json"]) == 0
        assert entries(capsys)["ResourceClaimTemplate"]["action"] == "deleted"
        assert kubectl("get", "resourceclaimtemplate", "-n", ns, "one-gpu", check=False).returncode != 0
    finally:
        kubectl("delete", "-n", ns, "pod/worker", "--wait=true", "--timeout=60s", check=False)


def selecting_trainer(kubectl: Kubectl, ns: str, *, label: dict[str, str]) -> str:
    """Run pod ``trainer`` on claim ``held``, selecting its node by ``label``; the node it runs on."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": ns},
        "spec": {
            "nodeSelector": label,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "held"}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    kubectl("wait", "-n", ns, "pod/trainer", "--for=jsonpath={.status.phase}=Running", "--timeout=90s")
    return device_of(kubectl, ns, "held")[0]


def test_a_held_pool_label_is_not_demanded_by_the_pools_gate_and_the_safe_part_applies(
    team: Repo, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pool label that a running GPU pod selects its node by is held for the closed window; the pools
    health gate verifies what the run wrote, not the held label, so the team's new template applies
    in seconds and the run succeeds (it does not wait out the health timeout and fail)."""
    repo, ns = team, team.ns("ml")
    label = f"t{repo.id}.example.com/p"
    node = "l4x4-01"
    repo.pool(
        "l4",
        selector={"sandbox.fleet.gpufleet.dev/pool": "l4x4"},
        labels={label: "l4"},
        gpus=4,
        product="NVIDIA L4",
    )
    assert cli.run(["apply", str(repo.write()), "--cluster", repo.cluster]) == 0
    try:
        assert selecting_trainer(kubectl, ns, label={label: "l4"}) == node

        repo.cluster_spec = {"maintenance": closed_window()}
        repo.pools["l4"] = repo.pools["l4"].replace(f'{label}: "l4"', f'{label}: "l4-renamed"')
        repo.claim_template("ml", "added")
        capsys.readouterr()
        args = ["apply", str(repo.write()), "--cluster", repo.cluster, "--health-timeout", "20", "-o", "json"]
        assert cli.run(args) == 0, capsys.readouterr()
        got = {
            f"{e['object']['kind']} {e['object']['name']}": e for e in json.loads(capsys.readouterr().out)["entries"]
        }
        held = got[f"Node {node}"]
        assert held["action"] == "skipped" and held["waiting"]["on"] == "window", held
        assert held["decision"]["verdict"] == "hold"
        assert got["ResourceClaimTemplate added"]["action"] == "created"
        assert got["ResourceClaimTemplate added"]["decision"]["verdict"] == "write"
        labels = json.loads(kubectl("get", "node", node, "-o", "json").stdout)["metadata"]["labels"]
        assert labels[label] == "l4", "the held label is not written"
        kubectl("get", "resourceclaimtemplate", "-n", ns, "added")
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "--wait=true", "--timeout=60s", check=False)
        kubectl("label", "node", node, f"{label}-", "fleet.gpufleet.dev/pool-", check=False)


def test_a_held_prune_of_a_class_in_use_drains_its_node_under_policy_drain(
    team: Repo, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, ns = team, team.ns("ml")
    repo.cluster_spec = {"disruption": {"policy": "drain", "maxUnavailable": 1}}
    old = f"t-{repo.id}-old.gpu.example.com"
    repo.files[f"deviceclasses/{old}.yaml"] = f"""\
        apiVersion: resource.k8s.io/v1
        kind: DeviceClass
        metadata:
          name: {old}
        spec:
          selectors:
          - cel:
              expression: "device.driver == 'gpu.nvidia.com'"
        """
    assert cli.run(["apply", str(repo.write()), "--cluster", repo.cluster]) == 0
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "old"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": old}}]}},
    }
    gpu_pod(kubectl, ns, name="trainer", claim="old", also=(claim,))
    node = ""
    try:
        kubectl("wait", "-n", ns, "pod/trainer", "--for=jsonpath={.status.phase}=Running", "--timeout=90s")
        node, _ = device_of(kubectl, ns, "old")
        del repo.files[f"deviceclasses/{old}.yaml"]
        path = str(repo.write())
        capsys.readouterr()

        assert cli.run(["apply", path, "--cluster", repo.cluster, "--prune", "-o", "json"]) == 0
        held = entry_of(capsys, "DeviceClass", old)
        assert held["action"] == "skipped" and held["waiting"]["on"] == "claims"
        assert held["waiting"]["intended"] == "deleted"
        assert f"draining node {node}: pod {ns}/trainer evicted" in held["reason"]
        assert cordoned_for(kubectl, f"resource.k8s.io/DeviceClass//{old}") == {node}
        assert kubectl("get", "deviceclass", old, check=False).returncode == 0, "held: not deleted yet"
        gone(kubectl, ns, "trainer", "old")

        assert cli.run(["apply", path, "--cluster", repo.cluster, "--prune", "-o", "json"]) == 0
        assert entry_of(capsys, "DeviceClass", old)["action"] == "deleted"
        live = json.loads(kubectl("get", "node", node, "-o", "json").stdout)
        assert not live["spec"].get("unschedulable"), "uncordoned once the prune went"
    finally:
        kubectl("delete", "-n", ns, "pod/trainer", "resourceclaim/old", "--wait=true", "--timeout=60s", check=False)
        if node:
            kubectl("uncordon", node, check=False)


SPREAD = ("a100x8-01", "h100x8-01", "h200x8-01")
"""Three GPU nodes of the sandbox, in name order: one job on each."""


def test_max_unavailable_bounds_the_nodes_being_drained_across_runs(
    team: Repo, kubectl: Kubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, ns = team, team.ns("ml")
    repo.cluster_spec = {"disruption": {"policy": "drain", "maxUnavailable": 1}}
    repo.teams["ml"].quota = 8
    for job in ("job-1", "job-2", "job-3"):
        repo.claim("ml", job)
    assert cli.run(["apply", str(repo.write()), "--cluster", repo.cluster]) == 0
    key = f"resource.k8s.io/DeviceClass//{repo.device_class_name}"

    def draining() -> set[str]:
        """Nodes fleet cordoned for the change that still hold one of the jobs: at most maxUnavailable."""
        pods = json.loads(kubectl("get", "pods", "-n", ns, "-o", "json").stdout)["items"]
        found = cordoned_for(kubectl, key) & {p["spec"].get("nodeName") for p in pods}
        assert len(found) <= 1, f"{sorted(found)} cordoned and draining at once with maxUnavailable 1"
        return found

    def run() -> str:
        assert cli.run(["apply", path, "--cluster", repo.cluster, "-o", "json"]) == 0
        held = entry_of(capsys, "DeviceClass", repo.device_class_name)
        assert held["action"] == "skipped" and held["waiting"]["on"] == "claims"
        return str(held["reason"])

    try:
        # The last node by name holds a job a budget keeps there.
        gpu_pod(kubectl, ns, name="job-3", claim="job-3", node=SPREAD[2], labels={"app": "job-3"})
        kubectl("wait", "-n", ns, "pod/job-3", "--for=jsonpath={.status.phase}=Running", "--timeout=90s")
        budget(kubectl, ns, "job-3")
        repo.device_class_expression = "device.driver == 'retired.example.com'"  # no device any more: all affected
        path = str(repo.write())
        capsys.readouterr()

        assert f"draining node {SPREAD[2]}: pod {ns}/job-3 not evicted" in run()
        assert draining() == {SPREAD[2]}

        # Jobs that start meanwhile on the nodes not cordoned are affected too; they wait for the slot.
        for job, node in (("job-1", SPREAD[0]), ("job-2", SPREAD[1])):
            gpu_pod(kubectl, ns, name=job, claim=job, node=node)
            kubectl("wait", "-n", ns, f"pod/{job}", "--for=jsonpath={.status.phase}=Running", "--timeout=90s")
        reason = run()
        assert f"nodes {SPREAD[0]}, {SPREAD[1]} wait for a drain slot (maxUnavailable 1)" in reason
        assert draining() == {SPREAD[2]}
        assert cordoned_for(kubectl, key) == {SPREAD[2]}

        kubectl("delete", "pdb", "-n", ns, "job-3")
        assert f"pod {ns}/job-3 evicted" in run()
        gone(kubectl, ns, "job-3", "job-3")

        # Then one node at a time; a drained node stays cordoned until the change is applied.
        for job, node in (("job-1", SPREAD[0]), ("job-2", SPREAD[1])):
            assert f"draining node {node}: pod {ns}/{job} evicted" in run()
            assert draining() <= {node}, "an evicted pod may be gone already"
            assert node in cordoned_for(kubectl, key)
            gone(kubectl, ns, job, job)
        assert cordoned_for(kubectl, key) == set(SPREAD)

        assert cli.run(["apply", path, "--cluster", repo.cluster, "-o", "json"]) == 0
        assert entry_of(capsys, "DeviceClass", repo.device_class_name)["action"] == "configured"
        assert cordoned_for(kubectl, key) == set(), "every drained node uncordoned once the change applied"
    finally:
        kubectl("delete", "pdb", "-n", ns, "job-3", check=False)
        kubectl("delete", "-n", ns, "pod/job-1", "pod/job-2", "pod/job-3", "--wait=true", "--timeout=60s", check=False)
        for node in SPREAD:
            kubectl("uncordon", node, check=False)
