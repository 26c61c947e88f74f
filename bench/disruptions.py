"""Benchmark: classing a 10,000-object revision as disruptive or safe, 1,000 GPU nodes (target: 100 ms).

Everything is built in-process, as the controller holds it: the ResourceSlices of 1,000 nodes x 8
GPUs exactly as the NVIDIA driver publishes them (``bench.common.gpu_slices``: H100, A100 and H200
nodes in turn), ``--claims`` allocated claims of one GPU each spread over every node (what the
controller's watch cache keeps), and a revision's ChangeSet of ``--objects`` entries: the pool's
1,000 Node writes (a label added: safe without a read), team objects (templates created and
changed, Roles, quotas, namespaces) and one DeviceClass whose selector is tightened to exclude the
A100s, so every claim allocated from it is evaluated against the devices it holds (a third fail).

The collector runs as ``fleetctl`` tunes it (``pipelines.tune_gc``), with the inputs frozen as the
controller freezes what it keeps (``fleet.controller.heaps``). Timed, best of 5:
``disruptions.classify`` over the whole ChangeSet with the claims and slices preloaded (the cache's
lists). For scale, the same run times the in-memory part of diffing the same entries: normalising
each before/after pair and comparing them (``normalizations.normalise``), which every diff does for
every changed object after its dry-run.

    .venv/bin/python bench/disruptions.py [--objects 10000] [--nodes 1000] [--claims 4000]
"""

from __future__ import annotations

import argparse
import copy
import gc
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import gpu_slices, result
from fleet.engine import disruptions, normalizations, pipelines
from fleet.engine.changesets import Action, Change
from fleet.kube import Ref

CLASS = "gpu.nvidia.com"
TARGET_MS = 100


def claims(slices: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """``count`` one-GPU claims allocated round-robin over the nodes' devices, as the scheduler leaves them."""
    devices = [
        (s["spec"]["nodeName"], s["spec"]["pool"]["name"], d["name"]) for s in slices for d in s["spec"]["devices"]
    ]
    per_node: dict[str, list[tuple[str, str, str]]] = {}
    for item in devices:
        per_node.setdefault(item[0], []).append(item)
    order = [d for i in range(8) for node in sorted(per_node) for d in per_node[node][i : i + 1]]
    out = []
    for i, (node, pool, device) in enumerate(order[:count]):
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"job-{i}-gpu", "namespace": f"team-{i % 50}"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
                "status": {
                    "allocation": {
                        "devices": {"results": [{"request": "gpu", "driver": CLASS, "pool": pool, "device": device}]},
                        "nodeSelector": {
                            "nodeSelectorTerms": [
                                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                            ]
                        },
                    },
                    "reservedFor": [{"resource": "pods", "name": f"job-{i}", "uid": str(i)}],
                },
            }
        )
    return out


def device_class(expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": CLASS, "labels": {"app.kubernetes.io/managed-by": "fleet"}},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def revision(*, objects: int, nodes: int) -> list[Change]:
    """The ChangeSet of a 10,000-object revision (see the module's docstring)."""
    out = [
        Change(
            ref=Ref("resource.k8s.io/v1", "DeviceClass", "", CLASS),
            stage="classes",
            action=Action.CONFIGURED,
            before=device_class(f"device.driver == '{CLASS}'"),
            after=device_class(
                f"device.driver == '{CLASS}' && device.attributes['{CLASS}'].productName != 'NVIDIA A100-SXM4-80GB'"
            ),
        )
    ]
    for i in range(nodes):
        name = f"gpu-{i:04d}"
        before = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": "bench"}}}
        after = copy.deepcopy(before)
        after["metadata"]["labels"]["team"] = "ml"
        out.append(
            Change(ref=Ref("v1", "Node", "", name), stage="pools", action=Action.CONFIGURED, before=before, after=after)
        )
    kinds = [
        ("resource.k8s.io/v1", "ResourceClaimTemplate", "claims"),
        ("resource.k8s.io/v1", "ResourceClaimTemplate", "claims"),
        ("resource.k8s.io/v1", "ResourceClaimTemplate", "claims"),
        ("rbac.authorization.k8s.io/v1", "Role", "tenancy"),
        ("v1", "ResourceQuota", "tenancy"),
        ("v1", "Namespace", "namespaces"),
    ]
    for i in range(objects - len(out)):
        api, kind, stage = kinds[i % len(kinds)]
        namespace = "" if kind == "Namespace" else f"team-{i % 50}"
        body = {
            "apiVersion": api,
            "kind": kind,
            "metadata": {"name": f"o-{i}", "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "fleet"}},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}},
        }
        after = copy.deepcopy(body)
        after["metadata"]["labels"]["rev"] = "2"
        created = i % 3 == 0
        out.append(
            Change(
                ref=Ref(api, kind, namespace, f"o-{i}"),
                stage=stage,
                action=Action.CREATED if created else Action.CONFIGURED,
                before=None if created else body,
                after=after,
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--claims", type=int, default=4_000)
    args = parser.parse_args()
    slices = gpu_slices(args.nodes)
    held = claims(slices, args.claims)
    print(
        f"{args.nodes} nodes, {len(slices)} slices, {sum(len(s['spec']['devices']) for s in slices)} devices, "
        f"{len(held)} allocated claims; {args.objects} objects in the revision"
    )
    classify_runs, normalise_runs, found = [], [], 0
    pipelines.tune_gc()
    for _ in range(5):
        entries = revision(objects=args.objects, nodes=args.nodes)
        gc.collect()
        gc.freeze()  # what a run holds is out of the collector's sight, as in fleet.controller.heaps
        reads = disruptions.Reads(preloaded={disruptions.CLAIM: held, disruptions.SLICE: slices})
        started = time.perf_counter()
        classed = anyio.run(lambda: disruptions.classify(entries, reads=reads))  # noqa: B023 (run at once)
        classify_runs.append(time.perf_counter() - started)
        found = sum(e.disruption is not None for e in classed)
        [tightened] = [e for e in classed if e.disruption is not None]
        started = time.perf_counter()
        for e in entries:
            _ = normalizations.normalise(e.before) == normalizations.normalise(e.after)
        normalise_runs.append(time.perf_counter() - started)
    assert tightened.disruption is not None
    print(
        f"disruptive: {found} ({tightened.ref}: {len(tightened.disruption.claims)} claims, "
        f"{len(tightened.disruption.nodes)} nodes)"
    )
    classify_ms, normalise_ms = min(classify_runs) * 1000, min(normalise_runs) * 1000
    median_ms = sorted(classify_runs)[len(classify_runs) // 2] * 1000
    first_ms = classify_runs[0] * 1000
    print(f"classify: best {classify_ms:.1f} ms, median {median_ms:.1f} ms, first run {first_ms:.0f} ms (loads CEL)")
    print(f"classify runs: {', '.join(f'{t * 1000:.0f}' for t in classify_runs)} ms")
    print(f"normalise and compare the same entries (the in-memory part of their diff): best {normalise_ms:.1f} ms")
    result(
        classify_ms=round(classify_ms, 1),
        median_ms=round(median_ms, 1),
        objects=args.objects,
        nodes=args.nodes,
        claims=len(held),
        disrupted_claims=len(tightened.disruption.claims),
        normalise_ms=round(normalise_ms, 1),
        ratio=round(classify_ms / normalise_ms, 2),
        target_ms=TARGET_MS,
    )


if __name__ == "__main__":
    main()
