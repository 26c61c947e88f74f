"""The operator stage: GPU Operator install, a no-op apply (zero writes) and the guide's manual helm upgrade.

Runs on its own sandbox (two H100 nodes) with the stand-in chart served on loopback and the
stand-in operator marking gpu-cluster Ready. The peer is what the guide does by hand on every
change: `helm upgrade --install` with the same chart and values, which writes a new release
revision even when nothing changed; fleet's no-op apply reads and writes nothing.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from common import result, sandbox

from fleet import engine, helm, kube
from fleet.engine import pipelines, stages
from fleet.kube import metrics
from fleet.sandbox import binaries, charts, credentials
from fleet.sandbox.operators import StandInOperator

VALUES = {
    "clusterPolicy": {"deployCR": False},
    "gpuCluster": {"deployCR": True},
    "driver": {"nvidiaDriverCRD": {"enabled": True}},
    "draDriver": {"computeDomains": {"enabled": False}},
}
WRITES = stages.WRITTEN_RESOURCES | {"secrets", "customresourcedefinitions", "gpuclusters", "daemonsets"}


def write_repo(root: Path, *, chart_repo: str) -> None:
    docs = {
        "fleet.yaml": {
            "apiVersion": "fleet.gpufleet.dev/v1alpha1",
            "kind": "Fleet",
            "metadata": {"name": "bench"},
            "spec": {"clusters": ["bench"]},
        },
        "clusters/bench.yaml": {
            "apiVersion": "fleet.gpufleet.dev/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": "bench"},
            "spec": {"kubernetesVersion": "1.36"},
        },
        "teams/ml/team.yaml": {
            "apiVersion": "fleet.gpufleet.dev/v1alpha1",
            "kind": "Team",
            "metadata": {"name": "ml"},
            "spec": {
                "namespaces": ["ml"],
                "owners": [{"kind": "Group", "name": "ml"}],
                "deviceClasses": ["bench.gpu.nvidia.com"],
            },
        },
        "deviceclasses/bench.yaml": {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "bench.gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
        },
        "operator/gpu-operator.yaml": {
            "apiVersion": "fleet.gpufleet.dev/v1alpha1",
            "kind": "GPUOperator",
            "metadata": {"name": "gpu-operator"},
            "spec": {
                "chart": {"repository": chart_repo, "name": "gpu-operator", "version": "v26.7.0"},
                "installPath": "gpuCluster",
                "values": VALUES,
            },
        },
    }
    for rel, doc in docs.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(doc, indent=1) + "\n")


def main() -> None:
    found = binaries.locate() or binaries.build()[0]
    with (
        tempfile.TemporaryDirectory(prefix="fleet-bench-op-") as tmp,
        sandbox({"h100x8": 2}) as sb,
        charts.serve(Path(tmp) / "charts", helm=found["helm"]) as url,
    ):
        repo = Path(tmp) / "repo"
        write_repo(repo, chart_repo=url)
        settings = helm.Settings(
            binary=found["helm"],
            kubeconfig=str(sb.kubeconfig),
            context=credentials.CLUSTER,
            home=Path(tmp) / "helm-home",
        )
        options = engine.Options(helm=settings, health_timeout=120)

        async def apply() -> engine.ChangeSet:
            plan = await anyio.to_thread.run_sync(lambda: pipelines.load_plan(repo, cluster="bench"))
            client = await kube.connect(kubeconfig=str(sb.kubeconfig), context=credentials.CLUSTER)
            try:
                return await engine.reconcile(client=client, plan=plan, options=options)
            finally:
                await client.close()

        async def server_metrics() -> str:
            client = await kube.connect(kubeconfig=str(sb.kubeconfig), context=credentials.CLUSTER)
            try:
                return await client.metrics()
            finally:
                await client.close()

        with StandInOperator(sb, interval=0.5):
            t = time.monotonic()
            installed = anyio.run(apply)
            install_s = time.monotonic() - t
        assert not installed.failed, [e.error for e in installed.failed]
        noop_times, writes = [], []
        for _ in range(3):
            before = anyio.run(server_metrics)
            t = time.monotonic()
            anyio.run(apply)
            noop_times.append(time.monotonic() - t)
            after = anyio.run(server_metrics)
            writes.append(
                metrics.writes(metrics.request_totals(before), metrics.request_totals(after), resources=WRITES)
            )
        h = helm.Helm(settings)
        chart = helm.ChartRef(repository=url, name="gpu-operator", version="v26.7.0")
        helm_times, helm_writes = [], []
        for _ in range(3):
            before = anyio.run(server_metrics)
            t = time.monotonic()
            anyio.run(lambda: h.upgrade(chart, release="gpu-operator", namespace="gpu-operator", values=VALUES))
            helm_times.append(time.monotonic() - t)
            after = anyio.run(server_metrics)
            helm_writes.append(
                metrics.writes(metrics.request_totals(before), metrics.request_totals(after), resources=WRITES)
            )
    noop = statistics.median(noop_times)
    manual = statistics.median(helm_times)
    print(f"install (helm upgrade --install + CRDs first + readiness gate): {install_s:.2f} s")
    print(f"no-op apply, median of 3: {noop:.2f} s, API writes {writes}")
    print(
        f"manual helm upgrade --install (unchanged chart and values), median of 3: {manual:.2f} s, "
        f"API writes {helm_writes}"
    )
    result(
        install_s=round(install_s, 2),
        noop_apply_s=round(noop, 2),
        noop_writes=max(writes),
        helm_upgrade_s=round(manual, 2),
        helm_upgrade_writes=min(helm_writes),
    )


if __name__ == "__main__":
    main()
