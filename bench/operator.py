"""The operator stage with NVIDIA's chart: first diff, install, the stage's no-op, and the guide's helm upgrade.

Runs on its own sandbox (two H100 nodes and the system node) with NVIDIA's gpu-operator chart
v26.7.0 (tests/data/gpu-operator) served on loopback and its controller played
(fleet.sandbox.operators). helm runs through a wrapper that logs each process it starts, so
every figure comes with the number of helm processes behind it:

- the first `fleetctl diff` against the cluster before the release exists (target <= 3 s);
- the install (CRDs first, `helm upgrade --install`, the readiness gate);
- the operator stage alone on an unchanged release (chart, values and the cluster's
  capabilities unchanged): target <= 0.5 s and 0 helm processes;
- a whole no-op apply (API writes counted by the API server);
- the peer: what the guide does by hand on every change, `helm upgrade --install` with the same
  chart and values, which writes a new release revision even when nothing changed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from common import result, sandbox

from fleet import engine, helm, kube
from fleet.engine import operators, pipelines, stages
from fleet.sandbox import binaries, charts, credentials
from fleet.sandbox.operators import StandInOperator
from tests import servermetrics as metrics

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = charts.Upstream(ROOT / "tests" / "data" / "gpu-operator")

VALUES = {
    "clusterPolicy": {"deployCR": False},
    "gpuCluster": {"deployCR": True},
    "driver": {"nvidiaDriverCRD": {"enabled": True}},
    "draDriver": {"computeDomains": {"enabled": False}},
}
WRITES = stages.WRITTEN_RESOURCES | {
    "secrets",
    "customresourcedefinitions",
    "gpuclusters",
    "daemonsets",
    "deployments",
    "nvidiadrivers",
}


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


def counting_helm(directory: Path, real: Path) -> tuple[Path, Path]:
    """A helm that logs each process it starts to ``calls`` and runs the real one."""
    directory.mkdir(parents=True, exist_ok=True)
    calls, wrapper = directory / "calls", directory / "helm"
    calls.touch()
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, calls


def count(calls: Path) -> int:
    return len(calls.read_text().splitlines())


def main() -> None:
    found = binaries.locate() or binaries.build()[0]
    UPSTREAM.require()
    with (
        tempfile.TemporaryDirectory(prefix="fleet-bench-op-") as tmp,
        sandbox({"h100x8": 2}) as sb,
        charts.serve(Path(tmp) / "charts", helm=found["helm"], upstream=UPSTREAM) as url,
    ):
        repo = Path(tmp) / "repo"
        write_repo(repo, chart_repo=url)
        wrapper, calls = counting_helm(Path(tmp) / "bin", found["helm"])
        settings = helm.Settings(
            binary=wrapper,
            kubeconfig=str(sb.kubeconfig),
            context=credentials.CLUSTER,
            home=Path(tmp) / "helm-home",
        )
        options = engine.Options(helm=settings, health_timeout=120)

        # The first diff, as a user runs it: a fresh process, the release absent, no CRDs yet.
        argv = [sys.executable, "-m", "fleetctl", "diff", str(repo), "--cluster", "bench"]
        argv += ["--kubeconfig", str(sb.kubeconfig), "--context", credentials.CLUSTER, "--helm", str(wrapper)]
        env = {**os.environ, "FLEET_CACHE_DIR": str(Path(tmp) / "cache"), "NO_COLOR": "1"}
        before_calls = count(calls)
        t = time.monotonic()
        diffed = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
        first_diff_s = time.monotonic() - t
        first_diff_helm = count(calls) - before_calls
        assert diffed.returncode == 1, diffed.stdout + diffed.stderr
        assert "+++ merged nvidia.com/v1alpha1/GPUCluster gpu-cluster" in diffed.stdout, diffed.stdout

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

        async def stage_noops(runs: int) -> list[tuple[float, int, str]]:
            """The operator stage alone, as the controller runs it: one connected client, a loaded plan and
            one ``operators.Noops`` kept across runs (the first run sees the release through helm)."""
            plan = await anyio.to_thread.run_sync(lambda: pipelines.load_plan(repo, cluster="bench"))
            client = await kube.connect(kubeconfig=str(sb.kubeconfig), context=credentials.CLUSTER)
            remembered = operators.Noops()
            out = []
            try:
                await client.discover()
                for _ in range(runs):
                    n = count(calls)
                    t = time.monotonic()
                    entries = await operators.Stage(
                        client=client, h=helm.Helm(settings), plan=plan, remembered=remembered
                    ).run()
                    out.append((time.monotonic() - t, count(calls) - n, str(entries[0].action)))
            finally:
                await client.close()
            return out

        with StandInOperator(sb, upstream=UPSTREAM, interval=0.5):
            t = time.monotonic()
            installed = anyio.run(apply)
            install_s = time.monotonic() - t
        assert not installed.failed, [e.error for e in installed.failed]
        seen, *stage = anyio.run(stage_noops, 6)
        assert all(action == "unchanged" for _, _, action in [seen, *stage]), stage
        noop_times, writes, noop_helm = [], [], []
        for _ in range(3):
            before = anyio.run(server_metrics)
            n = count(calls)
            t = time.monotonic()
            anyio.run(apply)
            noop_times.append(time.monotonic() - t)
            noop_helm.append(count(calls) - n)
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
    stage_s = statistics.median(s for s, _, _ in stage)
    stage_helm = max(n for _, n, _ in stage)
    noop = statistics.median(noop_times)
    manual = statistics.median(helm_times)
    print(
        f"first fleetctl diff, release absent (fresh process): {first_diff_s:.2f} s, {first_diff_helm} helm processes"
    )
    print(f"install (CRDs first, helm upgrade --install, readiness gate): {install_s:.2f} s")
    print(
        f"operator stage, first no-op (the release seen through helm, then remembered): {seen[0]:.2f} s, "
        f"{seen[1]} helm processes"
    )
    print(
        f"operator stage no-op, remembered, median of {len(stage)}: {stage_s:.2f} s, helm processes per run "
        f"{[n for _, n, _ in stage]} (target <= 0.5 s, 0 helm processes)"
    )
    print(
        f"no-op apply, one-shot process as fleetctl apply (nothing remembered), median of 3: {noop:.2f} s, "
        f"API writes {writes}, helm processes {noop_helm}"
    )
    print(
        f"manual helm upgrade --install (unchanged chart and values), median of 3: {manual:.2f} s, "
        f"API writes {helm_writes}"
    )
    result(
        first_diff_s=round(first_diff_s, 2),
        first_diff_helm=first_diff_helm,
        install_s=round(install_s, 2),
        stage_first_s=round(seen[0], 2),
        stage_first_helm=seen[1],
        stage_noop_s=round(stage_s, 2),
        stage_noop_helm=stage_helm,
        noop_apply_s=round(noop, 2),
        noop_writes=max(writes),
        noop_helm=max(noop_helm),
        helm_upgrade_s=round(manual, 2),
        helm_upgrade_writes=min(helm_writes),
    )


if __name__ == "__main__":
    main()
