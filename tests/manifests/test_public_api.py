"""The public surface of fleet.manifests and fleet.policy is what we mean to export."""

from __future__ import annotations

import fleet.manifests
import fleet.policy


def isort_order(names: list[str]) -> list[str]:
    """Constants, then classes, then the rest, each alphabetical (ruff RUF022)."""
    return sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))


def test_manifests_all_is_sorted_and_complete() -> None:
    exported = fleet.manifests.__all__
    assert exported == isort_order(exported)
    assert {"ClusterView", "Finding", "Manifest", "Revision", "load_revision", "read_revision", "resolve"} <= set(
        exported
    )
    for name in exported:
        assert hasattr(fleet.manifests, name), name


def test_policy_all_is_sorted_and_complete() -> None:
    exported = fleet.policy.__all__
    assert exported == isort_order(exported)
    for name in exported:
        assert hasattr(fleet.policy, name), name
