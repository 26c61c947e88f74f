"""fleet's image: its size, the layers fleet adds to its base, start → Ready of the overlay's pod, RSS in the container.

The image is ``./dev image`` (built by buildah unless this tree's image exists; the build's
seconds are printed when it runs). Sizes are podman's: the image, its base (the last stage's
``FROM``; a Debian bookworm stand-in where ``./dev`` had to make one, which is printed), and
each layer the Dockerfile adds on top (target: fleet adds ≤ 200 MB, issue 32).

Then the ``overlays/single-replica`` Deployment runs from the image in podman, as
tests/install/test_image.py runs it (tests/install/pods.py), against a sandbox shaped like the
example's gpu-east cluster, following the example fleet over ``git://`` with its GPU Operator
from NVIDIA's vendored chart on loopback (the operator played):

- start → Ready on a fresh cluster: ``podman kube play`` until the readiness probe passes
  and FleetSync is Ready at the revision, the GPU Operator installed by the image's helm;
- restart → Ready with nothing to change, ``--restarts`` times (SIGTERM, then ``podman start``);
- the controller's RSS in the container, and its peak (VmRSS, VmHWM of the container's main
  process), after the first start.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import result

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.sandbox import Sandbox, binaries, charts, clusters, profiles
from fleet.sandbox.operators import StandInOperator
from fleet.sandbox.processes import free_port
from fleetctl.commands.demo import sandbox_overlay
from tests.install import pods
from tests.source.gitservers import Upstream, daemon

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = charts.Upstream(ROOT / "tests" / "data" / "gpu-operator")
CLUSTER = "gpu-east"
MB = 1_000_000


def sizes(image: pods.Image) -> dict[str, float]:
    """MB (10^6 bytes, as podman prints them) of the image, its base and each layer fleet adds."""
    base = next(
        line.split()[1] for line in reversed((ROOT / "Dockerfile").read_text().splitlines()) if line.startswith("FROM ")
    )
    history = json.loads(image.podman("history", "--format", "json", image.ref).stdout)
    base_layers = len(json.loads(image.podman("history", "--format", "json", base).stdout))
    labels = json.loads(image.podman("image", "inspect", "--format", "{{json .Labels}}", base).stdout) or {}
    standin = labels.get("dev.gpufleet.standin")
    print(f"image {image.ref}: {image.size() / MB:.1f} MB")
    print(f"base {base}: {image.size(base) / MB:.1f} MB" + (f" (stand-in: {standin})" if standin else ""))
    added = [layer for layer in history[: len(history) - base_layers] if layer["size"]]
    for layer in reversed(added):
        step = layer["CreatedBy"].removeprefix("/bin/sh -c ")
        what = f"COPY → {step.rsplit(' in ', 1)[1].strip()}" if "#(nop) COPY" in step else f"RUN {step[:60]}…"
        print(f"  + {layer['size'] / MB:6.1f} MB  {what}")
    return {
        "image_mb": image.size() / MB,
        "base_mb": image.size(base) / MB,
        "added_mb": (image.size() - image.size(base)) / MB,
    }


def ready(sandbox: Sandbox, pod: pods.Pod, revision: str) -> bool:
    got = sandbox.kubectl("get", "fleetsync", CLUSTER, "-o", "json", check=False)
    status = (json.loads(got.stdout).get("status") or {}) if got.returncode == 0 else {}
    conditions = [c for c in status.get("conditions") or () if c["type"] == "Ready"]
    return (
        bool(conditions)
        and conditions[0]["status"] == "True"
        and status.get("lastAppliedRevision") == revision
        and pod.probe("readinessProbe")
    )


def until_ready(sandbox: Sandbox, pod: pods.Pod, revision: str, *, within: float = 300) -> float:
    start = time.monotonic()
    while time.monotonic() - start < within:
        if ready(sandbox, pod, revision):
            return time.monotonic() - start
        time.sleep(0.1)
    raise SystemExit(f"not Ready at {revision} within {within:g}s\n{pod.logs()[-4000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=3, help="restarts timed after the first start (default 3)")
    args = parser.parse_args()

    started = time.monotonic()
    image = pods.build()
    print(f"./dev image: {time.monotonic() - started:.1f}s (0 when this tree's image existed)")
    figures = sizes(image)

    found = binaries.locate()
    assert found is not None, "the sandbox binaries are not built: run ./dev setup"
    with tempfile.TemporaryDirectory(prefix="fleet-bench-image-") as tmp:
        root = Path(tmp)
        sb = clusters.up(
            directory=root / "sandbox", profile=profiles.load(ROOT / "examples" / "sandbox" / "gpu-east.yaml")
        )
        try:
            rendered = sb.kubectl("kustomize", str(ROOT / "overlays" / "single-replica")).stdout
            sb.kubectl("apply", "--server-side", "-f", "-", stdin=rendered)
            sb.kubectl("apply", "--server-side", "-f", str(ROOT / "overlays" / "gpu-operator" / "operator.yaml"))
            sb.kubectl("wait", "--for=condition=Established", "crd/fleetsyncs.fleet.gpufleet.dev", "--timeout=60s")
            account = pods.service_account(sb, root / "serviceaccount", namespace="fleet-system", name="fleet")
            upstream = Upstream(root / "git")
            shutil.copytree(ROOT / "examples" / "fleet", upstream.work, dirs_exist_ok=True)
            with (
                charts.serve(root / "charts", helm=found["helm"], upstream=UPSTREAM) as chart_repository,
                daemon(base=upstream.root) as git_port,
                StandInOperator(sb, upstream=UPSTREAM),
            ):
                overlay = sandbox_overlay(cluster=CLUSTER, chart_repository=chart_repository)
                revision = upstream.commit({"overlays/zz-sandbox/overlay.yaml": overlay}, message="the example")
                config = {
                    "FLEET_REPO": f"git://127.0.0.1:{git_port}/repo.git",
                    "FLEET_REF": "main",
                    "FLEET_CLUSTER": CLUSTER,
                }
                objects = pods.render(
                    sb, root / "install", overlay="single-replica", image=image, config=config, port=free_port()
                )
                played = time.monotonic()
                with pods.play(
                    image, objects, root / "pod", account=account, apiserver_port=sb.ports["apiserver"]
                ) as pod:
                    until_ready(sb, pod, revision)
                    first = time.monotonic() - played
                    print(f"start → Ready (fresh cluster, GPU Operator installed): {first:.1f}s")
                    rss, peak = pod.memory_mib()
                    print(f"RSS in the container: {rss:.0f} MiB (peak {peak:.0f} MiB)")
                    restarts = []
                    for _ in range(args.restarts):
                        pod.stop()
                        begun = time.monotonic()
                        image.podman("start", pod.container)
                        until_ready(sb, pod, revision)
                        restarts.append(time.monotonic() - begun)
                    if restarts:
                        print("restart → Ready (nothing to change): " + ", ".join(f"{s:.1f}s" for s in restarts))
        finally:
            clusters.down(directory=root / "sandbox", progress=lambda _m: None)
    result(
        **{k: f"{v:.1f}" for k, v in figures.items()},
        start_ready_s=f"{first:.1f}",
        restart_ready_s=f"{statistics.median(restarts):.1f}" if restarts else "-",
        rss_mib=f"{rss:.0f}",
        peak_rss_mib=f"{peak:.0f}",
    )


if __name__ == "__main__":
    main()
