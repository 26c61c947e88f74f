"""``helm upgrade --install`` and what follows when it fails.

helm installs or upgrades with exactly the declared values (``--reset-values``), labelled
``app.kubernetes.io/managed-by=fleet``. If helm fails after writing a revision, fleet rolls
back to the last deployed revision from Helm's own history, so the release is never left
failed at a half-applied revision.
"""

from __future__ import annotations

from fleet import helm
from fleet.engine.changesets import Change
from fleet.engine.plans import OperatorRelease


async def upgrade(
    h: helm.Helm, *, chart: helm.ChartRef, desired: OperatorRelease, change: Change
) -> helm.HelmError | None:
    """Install or upgrade the release; on failure the entry's error says why and what was remediated."""
    try:
        await h.upgrade(chart, release=desired.release, namespace=desired.namespace, values=desired.values)
    except helm.HelmError as err:
        change.error = str(err)
        await roll_back(h, desired=desired, change=change)
        return err
    return None


async def roll_back(h: helm.Helm, *, desired: OperatorRelease, change: Change) -> None:
    """Back to the last good revision after a failed upgrade; the entry's error says what happened."""
    history = await h.history(name=desired.release, namespace=desired.namespace)
    good = [e for e in history if e.get("status") in ("deployed", "superseded")]
    if not good or not history or history[-1].get("status") != "failed":
        return  # helm refused before writing a revision (or there is nothing to go back to)
    target = int(good[-1]["revision"])
    try:
        await h.rollback(name=desired.release, namespace=desired.namespace, revision=target)
        change.error += f"\n  rolled back to revision {target} (helm history)"
    except helm.HelmError as err:
        change.error += f"\n  rollback to revision {target} failed too: {err.what}"


__all__ = ["roll_back", "upgrade"]
