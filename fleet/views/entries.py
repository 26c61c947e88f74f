"""Which entries of a ChangeSet people are shown, and in which columns: the terminal and the comment alike.

``fleetctl diff`` prints a ChangeSet to a terminal (``fleetctl.reports``) and as a pull-request
comment (``fleet.views.comments``, which the console's Revision page renders too); both count the
same columns and show a diff for the same entries, so both read them here.
"""

from __future__ import annotations

from fleet.engine import Action, Change

COLUMNS = (Action.CREATED, Action.CONFIGURED, Action.UNCHANGED, Action.DELETED, Action.SKIPPED)
"""The stage table's columns."""
SHOWN = (Action.CREATED, Action.CONFIGURED, Action.DELETED)
"""The actions whose entries carry a diff."""


def shown(entry: Change) -> bool:
    """Whether ``entry`` has a diff to show: a change (one held back too), or drift a ``warn`` policy only reports."""
    if entry.failed:
        return False
    if entry.held is not None:  # held back for a window or running jobs: still what will change
        return True
    return entry.action in SHOWN or (entry.action == Action.SKIPPED and entry.drift and entry.after is not None)


__all__ = ["COLUMNS", "SHOWN", "shown"]
