"""Sandbox start time, time to a running GPU pod, and memory of each component (warm binaries).

The peer is the guide's own path on the same control plane: `kubectl apply` of
single-gpu-pod.yaml and `kubectl wait` for Running, versus fleet's start of the
whole stack, so the ratio says how much of a test's wall time the sandbox costs
compared with one scheduling round trip.
"""

from __future__ import annotations

import json
import time

from common import result, rss_mb, sandbox

from fleet.sandbox import binaries

POD = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-example"}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "single-gpu", "namespace": "gpu-example"},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "gpu-pod", "namespace": "gpu-example"},
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
                "containers": [{"name": "w", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}}],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
        },
    ],
}


def main() -> None:
    if binaries.locate() is None:
        binaries.build()
    started = time.monotonic()
    with sandbox() as sb:
        start_s = time.monotonic() - started
        t = time.monotonic()
        sb.kubectl("apply", "-f", "-", stdin=json.dumps(POD))
        sb.kubectl(
            "wait", "-n", "gpu-example", "--for=jsonpath={.status.phase}=Running", "pod/gpu-pod", "--timeout=120s"
        )
        pod_s = time.monotonic() - t
        rss = {c.name: rss_mb(c.pid) for c in sb.components}
        print(f"{'step':40} seconds")
        for step, secs in sb.timings.items():
            print(f"{step:40} {secs:.2f}")
        print(f"{'first GPU pod Running':40} {pod_s:.2f}")
        print(f"\n{'component':26} RSS MiB")
        for name, mb in rss.items():
            print(f"{name:26} {mb:.0f}")
        total = sum(rss.values())
        print(f"{'total':26} {total:.0f}")
        result(
            start_s=round(start_s, 2),
            first_pod_s=round(pod_s, 2),
            rss_total_mb=round(total),
            **{f"rss_{k.replace('-', '_')}_mb": round(v) for k, v in rss.items()},
            start_over_first_pod=round(start_s / pod_s, 1),
        )


if __name__ == "__main__":
    main()
