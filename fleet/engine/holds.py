"""What the object's drift policy, or a person's freeze, makes of a diffed Change: pure.

A diff says what applying would change; whether fleet writes it depends on who changed
the object. A change in git always applies. A change made in the cluster (drift) is
taken back under ``enforce``, reported and left under ``report``, hidden under
``ignore``. A freeze on the live object (``fleet.engine.drifts``) wins over both: nothing
is written to it, git change or drift. The preview and the apply call the same functions,
so a diff shows exactly what the apply will leave alone.
"""

from __future__ import annotations

from fleet.engine import drifts
from fleet.engine.changesets import Action, Change


def apply_policy(change: Change, policy: str) -> Change:
    """Cluster-side drift under ``report`` is reported, under ``ignore`` hidden; git changes always apply."""
    if not change.drift or policy == "enforce":
        return change
    owners = sorted({c.manager for c in change.conflicts if c.manager})
    by = f" ({change.error.splitlines()[0]})" if change.error else (f" by {', '.join(owners)}" if owners else "")
    what = "deleted in the cluster" if change.action == Action.CREATED else "changed in the cluster"
    # A conflict over drift is what the policy is about, not a failure; the policy does not re-apply,
    # so nothing is taken from anyone.
    if policy == "report":
        return change.replaced(
            error="",
            conflicts=(),
            action=Action.SKIPPED,
            reason=f"{what}{by}; drift policy report: reported, not re-applied",
        )
    return change.replaced(error="", conflicts=(), action=Action.UNCHANGED, reason=f"{what}; drift policy ignore")


def hold(change: Change, freeze: drifts.Freeze) -> Change:
    """A live freeze: nothing is written to the object, drift or git change; ``report`` says what differs."""
    if change.action not in (Action.CREATED, Action.CONFIGURED) and not change.failed and not change.drift:
        return change
    owners = sorted({c.manager for c in change.conflicts if c.manager})
    what = ("changed in the cluster" + (f" by {', '.join(owners)}" if owners else "")) if change.drift else ""
    what = what or ("deleted in the cluster" if change.action == Action.CREATED else "differs from git")
    left = {"error": "", "conflicts": (), "forced": False, "replace": False}  # nothing is deleted either
    if freeze.mode == "report":
        return change.replaced(**left, action=Action.SKIPPED, reason=f"{what}; {freeze.describe()}: not applied")
    # ignore: left alone without reporting
    return change.replaced(**left, action=Action.UNCHANGED, reason=f"{what}; {freeze.describe()}", drift=False)


__all__ = ["apply_policy", "hold"]
