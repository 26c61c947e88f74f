"""Where the test data lives: ``tests/data`` inside the checkout.

The project stands alone: a clone has everything its tests read, so nothing here
points outside the repository (``tests/data/README.md`` says where each file came from).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
FIXTURES = DATA
"""``resourceslices/`` (NVIDIA DRA driver slices) and ``nvml/`` (an H200 reading)."""
SEED = DATA / "guide"
"""The manifests of the guide "How Does DRA Work for GPUs in Kubernetes? A Hands-On Guide"."""
GPU_OPERATOR = ROOT / "tests" / "data" / "gpu-operator"
"""NVIDIA/gpu-operator at v26.7.0: its chart and the DRA driver's state manifests (see its README.md)."""
CHARTS = DATA / "charts"
"""Helm chart pieces the tests package with the real helm binary (``hooks/``: hook Jobs)."""
REAL_GPU = DATA / "real-gpu"
"""A capture of fleet's ``ml-research/h100-gpu`` on a real H100 with NVIDIA's DRA kubelet plugin (see its README.md)."""
