"""fleetctl import of a large hand-made cluster: 1,000 GPU nodes, 200 namespaces, 2,000 templates.

The benchmark's own sandbox gets ``--nodes`` Nodes (H100, A100 and H200 in turn, as GPU
feature discovery labels them, the H100s labelled and tainted by hand) with the
ResourceSlices the NVIDIA driver publishes for them, ``--namespaces`` namespaces each
holding ``--templates`` / ``--namespaces`` ResourceClaimTemplates and fleet's team Role
and RoleBinding. KWOK keeps the Nodes Ready, as it does the sandbox's own: a Node nobody
heartbeats gets the node lifecycle controller's taints, and its diff would show them.

Timed, each as a whole process started from the shell: ``fleetctl import --no-adopt``
(read, map, validate, write the files), and its peer ``kubectl get -o yaml`` of the same
kinds (reads and prints the same objects, maps nothing). Then ``fleetctl import`` with the
take-over (the apply that adopts every object) into a second directory, counting the requests
the API server answered for it (``apiserver_request_total``), and ``fleetctl diff`` of that
repository, whose exit code must be 0: the promise, at scale.

The take-over's peer comes last: ``kubectl apply --server-side`` (field manager
``bench-peer``) of exactly the labels and annotations the take-over left on the objects
it configured (the Nodes included; not the team ServiceAccounts it created, nor its
ledger): the same marks on the same objects, one request each, as a person would send
them with kubectl (``--validate=warn``: kubectl's client-side schema check refuses a body
of metadata only; the API server still checks the fields).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from common import gpu_slices, result, sandbox

from fleet import kube
from fleet.engine import ownership, renders, stages, workers
from fleet.sandbox import Sandbox, credentials, gpus
from tests import servermetrics as metrics

CLASS = "gpu.nvidia.com"
KINDS = ",".join(
    (
        *("nodes", "resourceslices", "namespaces", "deviceclasses", "resourceclaimtemplates", "resourceclaims"),
        *("roles", "rolebindings", "resourcequotas", "clusterroles", "deployments", "pods"),
    )
)


def objects(*, nodes: int, namespaces: int, templates: int) -> list[dict[str, Any]]:
    """What a team following the guide by hand would have made, at scale."""
    out: list[dict[str, Any]] = []
    slices = gpu_slices(nodes)
    for s in slices:
        s["metadata"].pop("ownerReferences", None)
    for index in range(nodes):
        model = [gpus.MODELS[k] for k in ("h100", "a100", "h200")][index % 3]
        spec = gpus.NodeSpec(name=f"gpu-{index:04d}", ordinal=index + 1, pool="bench", model=model, gpus=8)
        node = gpus.node_manifest(spec)
        if index % 3 == 0:  # the H100s: labelled and tainted by hand
            node["metadata"]["labels"]["gpufleet.dev/team"] = "research"
            node["spec"]["taints"].append(
                {"key": "gpufleet.dev/dedicated", "value": "research", "effect": "NoSchedule"}
            )
        out.append(node)
    out += slices
    per = max(1, templates // namespaces)
    for n in range(namespaces):
        ns = f"team-{n:03d}"
        out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for t in range(per):
            out.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaimTemplate",
                    "metadata": {"name": f"gpus-{t:02d}", "namespace": ns},
                    "spec": {
                        "spec": {
                            "devices": {
                                "requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS, "count": 1 + t % 4}}]
                            }
                        }
                    },
                }
            )
    return out


def rbac(namespaces: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(namespaces):
        ns = f"team-{n:03d}"
        rule = {
            "apiGroups": ["resource.k8s.io"],
            "resources": list(renders.CLAIM_RESOURCES),
            "verbs": list(renders.CLAIM_VERBS),
        }
        meta = {"name": renders.TEAM_ROLE, "namespace": ns}
        out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": [rule]})
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": dict(meta),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": renders.TEAM_ROLE},
                "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": f"{ns}-users"}],
            }
        )
    return out


async def create(sb: Sandbox, items: list[dict[str, Any]]) -> None:
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    try:

        async def one(obj: dict[str, Any]) -> None:
            await client.apply(obj, field_manager="kubectl-client-side-apply")

        await workers.for_each(items, one, concurrency=32)
    finally:
        await client.close()


def settled(sb: Sandbox, *, nodes: int, within: float = 600.0) -> None:
    """Wait until KWOK has taken up every new Node (it labels and readies them): a Node still changing
    under the import would show in the diff that follows it."""
    deadline = time.monotonic() + within
    selector = "beta.kubernetes.io/os,sandbox.fleet.gpufleet.dev/pool=bench"
    while True:
        found = len(sb.kubectl("get", "nodes", "-l", selector, "-o", "name").stdout.split())
        if found >= nodes:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"KWOK took up {found} of {nodes} nodes in {within:g} s")
        time.sleep(2)


MARKED = "namespaces,deviceclasses,roles,rolebindings,resourceclaimtemplates,nodes"
"""The kinds of the objects the take-over configures (it creates the team ServiceAccounts)."""


def marks(sb: Sandbox) -> list[dict[str, Any]]:
    """fleet's labels and annotations on every object the take-over configured, as apply bodies."""
    listed = json.loads(sb.kubectl("get", MARKED, "-A", "-o", "json").stdout)["items"]
    out: list[dict[str, Any]] = []
    for obj in listed:
        meta = obj["metadata"]
        labels = {
            k: v
            for k, v in (meta.get("labels") or {}).items()
            if k == ownership.MANAGED_BY or k.startswith(f"{ownership.DOMAIN}/")
        }
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(f"{ownership.DOMAIN}/")}
        if not labels or ledgers_namespace(meta):
            continue
        body = {"name": meta["name"], "labels": labels, "annotations": annotations}
        if meta.get("namespace"):
            body["namespace"] = meta["namespace"]
        out.append({"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": body})
    return out


def ledgers_namespace(meta: dict[str, Any]) -> bool:
    """fleet-system, which the take-over creates for its ledger and Lease."""
    return "fleet-system" in (meta.get("name"), meta.get("namespace"))


async def request_totals(sb: Sandbox) -> Any:
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    try:
        return metrics.request_totals(await client.metrics())
    finally:
        await client.close()


CPU: list[float] = []
"""The CPU seconds (user + system) of each ``timed`` command, in turn."""


def timed(argv: list[str], *, env: dict[str, str], stdout: Any = subprocess.DEVNULL) -> tuple[float, int, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return elapsed, done.returncode, done.stderr


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--namespaces", type=int, default=200)
    parser.add_argument("--templates", type=int, default=2000)
    parser.add_argument("--profile", metavar="FILE", help="run the take-over's fleetctl under cProfile, writing FILE")
    args = parser.parse_args(argv)
    with sandbox({"l4x4": 1}) as sb, tempfile.TemporaryDirectory(prefix="fleet-bench-import-") as tmp:
        started = time.perf_counter()
        made = objects(nodes=args.nodes, namespaces=args.namespaces, templates=args.templates)
        anyio.run(create, sb, [o for o in made if o["kind"] == "Namespace"])
        anyio.run(create, sb, [o for o in made if o["kind"] != "Namespace"] + rbac(args.namespaces))
        print(f"made {len(made) + 2 * args.namespaces} objects by hand in {time.perf_counter() - started:.1f} s")
        settled(sb, nodes=args.nodes)
        env = {**os.environ, "KUBECONFIG": str(sb.kubeconfig), "NO_COLOR": "1"}
        fleetctl = str(Path(sys.executable).parent / "fleetctl")
        common = ["--context", credentials.CLUSTER, "--helm", str(sb.binary("helm"))]
        first = Path(tmp) / "written"
        import_s, code, err = timed(
            [fleetctl, "import", str(first), "--cluster", "bench", "--no-adopt", *common], env=env
        )
        assert code == 0, err
        files = sum(1 for _ in first.rglob("*.yaml"))
        with (Path(tmp) / "peer.yaml").open("w") as out:
            peer_s, code, err = timed(
                [str(sb.binary("kubectl")), "get", KINDS, "-A", "-o", "yaml"], env=env, stdout=out
            )
        assert code == 0, err
        second = Path(tmp) / "adopted"
        before = anyio.run(request_totals, sb)
        profiled = [sys.executable, "-m", "cProfile", "-o", args.profile] if args.profile else []
        adopt_s, code, err = timed([*profiled, fleetctl, "import", str(second), "--cluster", "bench", *common], env=env)
        assert code == 0, err
        adopt_cpu = CPU[-1]
        after = anyio.run(request_totals, sb)
        resources = set(stages.WRITTEN_RESOURCES) | {"configmaps", "resourceslices"}
        adopt_requests = metrics.total(before, after, resources=resources)
        adopt_writes = metrics.writes(before, after, resources=resources)
        print("the take-over's requests as the API server counted them (verb resource/subresource dry-run: count):")
        for (verb, res, sub, dry), n in sorted(
            ((k, after[k] - before.get(k, 0)) for k in after), key=lambda kv: -kv[1]
        ):
            if n and res in resources | {
                "selfsubjectaccessreviews",
                "subjectaccessreviews",
                "leases",
                "serviceaccounts",
            }:
                print(f"  {verb} {res}{'/' + sub if sub else ''}{' dry-run' if dry else ''}: {n}")
        with (Path(tmp) / "diff.txt").open("w") as out:
            diff_s, diff_exit, err = timed(
                [fleetctl, "diff", str(second), "--cluster", "bench", *common], env=env, stdout=out
            )
        if diff_exit != 0:
            print("fleetctl diff after the import (should be empty):", err, sep="\n")
            print("\n".join((Path(tmp) / "diff.txt").read_text().splitlines()[:60]))
        peer_body = Path(tmp) / "marks.json"
        marked = marks(sb)
        peer_body.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": marked}))
        kubectl = [str(sb.binary("kubectl")), "apply", "--server-side", "--field-manager=bench-peer", "--validate=warn"]
        marks_s, code, err = timed([*kubectl, "-f", str(peer_body)], env=env)
        assert code == 0, err
        marks_cpu = CPU[-1]
    print(f"fleetctl import --no-adopt: {import_s:.2f} s ({files} files)")
    print(f"kubectl get -o yaml of the same kinds (peer): {peer_s:.2f} s")
    print(
        f"fleetctl import with the take-over: {adopt_s:.2f} s, {adopt_cpu:.2f} s of CPU "
        f"({adopt_requests} requests, {adopt_writes} writes); "
        f"then fleetctl diff: {diff_s:.2f} s, exit {diff_exit}"
    )
    print(
        f"kubectl apply --server-side of the same marks on the same {len(marked)} objects (peer): {marks_s:.2f} s, "
        f"{marks_cpu:.2f} s of CPU"
    )
    result(
        nodes=args.nodes,
        namespaces=args.namespaces,
        templates=args.templates,
        files=files,
        import_s=round(import_s, 2),
        kubectl_get_s=round(peer_s, 2),
        import_adopt_s=round(adopt_s, 2),
        adopt_requests=adopt_requests,
        adopt_writes=adopt_writes,
        kubectl_marks_s=round(marks_s, 2),
        ratio=round(adopt_s / marks_s, 2),
        import_adopt_cpu_s=round(adopt_cpu, 2),
        kubectl_marks_cpu_s=round(marks_cpu, 2),
        marked=len(marked),
        diff_after_s=round(diff_s, 2),
        diff_exit=diff_exit,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
