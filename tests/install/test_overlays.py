"""overlays/ install what fleet needs in a cluster, and no more: checked on the real sandbox."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from fleet.sandbox import Sandbox

pytestmark = pytest.mark.sandbox
ROOT = Path(__file__).resolve().parents[2]


def service_account_kubeconfig(sb: Sandbox, path: Path) -> Path:
    deadline = time.monotonic() + 60
    while True:
        secret = json.loads(sb.kubectl("get", "secret", "-n", "fleet-system", "fleet-ci-token", "-o", "json").stdout)
        if secret.get("data", {}).get("token"):
            break
        assert time.monotonic() < deadline, "the token controller never filled fleet-ci-token"
        time.sleep(0.3)
    token = base64.b64decode(secret["data"]["token"]).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "fleet-ci",
        "clusters": [{"name": "sandbox", "cluster": {"server": sb.server, "certificate-authority": str(sb.ca_file)}}],
        "users": [{"name": "fleet-ci", "user": {"token": token}}],
        "contexts": [{"name": "fleet-ci", "context": {"cluster": "sandbox", "user": "fleet-ci"}}],
    }
    with path.open("w") as fh:
        YAML(typ="safe", pure=True).dump(config, fh)
    return path


def fleetctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetctl", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, NO_COLOR="1"),
        check=False,
    )


def test_ci_runner_service_account_can_apply_and_prune_the_example(gpu_east: Sandbox, tmp_path: Path) -> None:
    gpu_east.kubectl("apply", "-k", str(ROOT / "overlays" / "ci-runner"))
    kc = str(service_account_kubeconfig(gpu_east, tmp_path / "ci.kubeconfig"))
    repo = str(ROOT / "examples" / "fleet")
    target = ["--cluster", "gpu-east", "--kubeconfig", kc, "--context", "fleet-ci"]
    applied = fleetctl("apply", repo, *target, "--prune")
    assert applied.returncode == 0, applied.stdout[-3000:] + "\n---\n" + applied.stderr[-3000:]
    diff = fleetctl("diff", repo, *target)
    assert diff.returncode == 0, diff.stdout[-2000:] + diff.stderr[-2000:]
    # Everything the team tenancy stage wrote exists, created by the service account.
    roles = json.loads(
        gpu_east.kubectl("get", "roles", "-A", "-l", "app.kubernetes.io/managed-by=fleet", "-o", "json").stdout
    )["items"]
    assert {r["metadata"]["namespace"] for r in roles} >= {"ml-research", "inference"}


APPLIER = ("base", ["-A", "--as=system:serviceaccount:fleet-system:fleet"])
IN_FLEET_SYSTEM = ("base", ["-n", "fleet-system", "--as=system:serviceaccount:fleet-system:fleet"])
IN_GPU_OPERATOR = ("base", ["-n", "gpu-operator", "--as=system:serviceaccount:fleet-system:fleet"])
TOKENS = ("base", ["-A", "--as=system:serviceaccount:fleet-system:fleet", "--subresource=token"])
READER = ("inventory-reader", ["--as=oncall", "--as-group=fleet:inventory-readers"])


@pytest.mark.parametrize(
    ("overlay", "verb", "resource", "allowed"),
    [
        # the applier has only what `fleetctl apply --prune` uses
        (APPLIER, "patch", "deviceclasses.resource.k8s.io", "yes"),
        (APPLIER, "patch", "nodes", "yes"),
        (APPLIER, "create", "resourceclaimtemplates.resource.k8s.io", "yes"),
        (APPLIER, "delete", "resourceslices.resource.k8s.io", "no"),
        (APPLIER, "create", "clusterroles.rbac.authorization.k8s.io", "no"),
        (APPLIER, "get", "secrets", "no"),
        (IN_GPU_OPERATOR, "list", "secrets", "no"),  # helm's release record: only with overlays/gpu-operator
        (APPLIER, "create", "customresourcedefinitions.apiextensions.k8s.io", "no"),
        (APPLIER, "delete", "pods", "no"),
        (APPLIER, "update", "deviceclasses.resource.k8s.io", "no"),
        (APPLIER, "patch", "fleetsyncs.fleet.gpufleet.dev/status", "yes"),
        (APPLIER, "create", "fleetsyncs.fleet.gpufleet.dev", "yes"),
        (APPLIER, "delete", "fleetsyncs.fleet.gpufleet.dev", "no"),
        (APPLIER, "create", "events", "yes"),
        # teams' objects are written as the teams' ServiceAccounts, named fleet-team, and as nobody else
        (APPLIER, "impersonate", "serviceaccounts/fleet-team", "yes"),
        (APPLIER, "impersonate", "serviceaccounts/default", "no"),
        (APPLIER, "impersonate", "users/admin", "no"),
        (APPLIER, "impersonate", "groups/system:masters", "no"),
        (TOKENS, "create", "serviceaccounts", "no"),  # it makes them, and never a token of one
        # the writer Lease: read, watched, created, renewed and released in fleet-system only
        (IN_FLEET_SYSTEM, "update", "leases.coordination.k8s.io", "yes"),
        (IN_FLEET_SYSTEM, "create", "leases.coordination.k8s.io", "yes"),
        (IN_FLEET_SYSTEM, "watch", "leases.coordination.k8s.io", "yes"),
        (IN_FLEET_SYSTEM, "delete", "leases.coordination.k8s.io", "no"),
        (APPLIER, "update", "leases.coordination.k8s.io", "no"),
        # the inventory-reader group reads devices, nothing else
        (READER, "list", "resourceslices.resource.k8s.io", "yes"),
        (READER, "list", "deviceclasses.resource.k8s.io", "yes"),
        (READER, "patch", "deviceclasses.resource.k8s.io", "no"),
        (READER, "create", "resourceclaims.resource.k8s.io", "no"),
    ],
)
def test_overlay_grants_exactly_what_it_says(
    gpu_east: Sandbox, overlay: tuple[str, list[str]], verb: str, resource: str, allowed: str
) -> None:
    name, identity = overlay
    gpu_east.kubectl("apply", "-k", str(ROOT / "overlays" / name))
    can = gpu_east.kubectl("auth", "can-i", verb, resource, *identity, check=False)
    assert can.stdout.strip() == allowed


SA = "system:serviceaccount:fleet-system:fleet"
CRDS = "customresourcedefinitions"
OPERATOR_GRANTS = [
    # (verb, group, resource, namespace, name): allowed; asked with a SubjectAccessReview, which
    # needs no discovery (the chart's CRDs are not installed in this sandbox)
    # helm's release Secrets in the operator's namespace, and nowhere else
    (("list", "", "secrets", "gpu-operator", ""), True),
    (("update", "", "secrets", "gpu-operator", ""), True),
    (("get", "", "secrets", "kube-system", ""), False),
    (("get", "", "secrets", "fleet-system", ""), False),
    (("list", "", "secrets", "", ""), False),
    # the chart's namespaced objects there
    (("create", "apps", "daemonsets", "gpu-operator", ""), True),
    (("create", "apps", "daemonsets", "kube-system", ""), False),
    # CRDs: created (RBAC cannot name them on create), changed only by name, never deleted
    (("create", "apiextensions.k8s.io", CRDS, "", ""), True),
    (("patch", "apiextensions.k8s.io", CRDS, "", "gpuclusters.nvidia.com"), True),
    (("patch", "apiextensions.k8s.io", CRDS, "", "fleetsyncs.fleet.gpufleet.dev"), False),
    (("delete", "apiextensions.k8s.io", CRDS, "", "gpuclusters.nvidia.com"), False),
    (("create", "nvidia.com", "gpuclusters", "", ""), True),
    (("delete", "nvidia.com", "gpuclusters", "", ""), False),
    (("create", "nvidia.com", "clusterpolicies", "", ""), False),
    # the real chart's ClusterRoles: bound by name only; escalate on any (a create carries no name
    # when RBAC authorizes it, so escalate by name would never let NVIDIA's chart install)
    (("escalate", "rbac.authorization.k8s.io", "clusterroles", "", ""), True),
    (("bind", "rbac.authorization.k8s.io", "clusterroles", "", "gpu-operator"), True),
    (("bind", "rbac.authorization.k8s.io", "clusterroles", "", "gpu-operator-upgrade-crd-hook-role"), True),
    (("bind", "rbac.authorization.k8s.io", "clusterroles", "", "cluster-admin"), False),
    # the chart's CRDs, node-feature-discovery's included; its hook Jobs in the operator's namespace
    (("patch", "apiextensions.k8s.io", CRDS, "", "nodefeatures.nfd.k8s-sigs.io"), True),
    (("create", "batch", "jobs", "gpu-operator", ""), True),
    (("create", "batch", "jobs", "kube-system", ""), False),
]


def allowed(sb: Sandbox, verb: str, group: str, resource: str, namespace: str, name: str) -> bool:
    attributes = {"verb": verb, "group": group, "resource": resource, "namespace": namespace, "name": name}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": SA,
            "groups": ["system:serviceaccounts", "system:serviceaccounts:fleet-system", "system:authenticated"],
            "resourceAttributes": {k: v for k, v in attributes.items() if v},
        },
    }
    out = sb.kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(review)).stdout
    return bool(json.loads(out)["status"].get("allowed"))


def test_gpu_operator_overlay_grants_the_operator_stage_and_no_more(gpu_east: Sandbox) -> None:
    gpu_east.kubectl("apply", "-k", str(ROOT / "overlays" / "gpu-operator"))
    try:
        got = [(attrs, allowed(gpu_east, *attrs)) for attrs, _ in OPERATOR_GRANTS]
        assert got == OPERATOR_GRANTS
    finally:
        # Back to the base install: the other tests here check base alone.
        gpu_east.kubectl("delete", "clusterrolebinding", "fleet-gpu-operator", "--ignore-not-found")
        gpu_east.kubectl("delete", "rolebinding", "-n", "gpu-operator", "fleet-gpu-operator", "--ignore-not-found")
    assert not allowed(gpu_east, "list", "", "secrets", "gpu-operator", "")
