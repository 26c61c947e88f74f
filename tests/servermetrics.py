"""Reading the API server's own request counters (``apiserver_request_total`` on ``/metrics``).

A claim like "a no-op reconcile makes zero writes" is only convincing when the
server counts it, not the client. The counter has labels ``verb`` (GET, LIST,
WATCH, POST, PUT, PATCH, APPLY, DELETE...), ``resource``, ``subresource`` and
``dry_run``; comparing two snapshots around a run gives what the run sent, as long
as nothing else writes the same resources meanwhile (controllers write status
subresources, leases and events, which are therefore told apart).

``rejected_requests`` reads API Priority and Fairness' own count of the requests it
answered 429 (``apiserver_flowcontrol_rejected_requests_total``) for one priority level.
"""

from __future__ import annotations

import re
from collections import Counter

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})
_LINE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")
_REJECTED = re.compile(r"^apiserver_flowcontrol_rejected_requests_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')

Key = tuple[str, str, str, str]
"""(verb, resource, subresource, dry_run)."""


def request_totals(text: str) -> Counter[Key]:
    """``apiserver_request_total`` summed over codes/scopes, by (verb, resource, subresource, dry_run)."""
    totals: Counter[Key] = Counter()
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m["labels"]))
        key = (
            labels.get("verb", ""),
            labels.get("resource", ""),
            labels.get("subresource", ""),
            labels.get("dry_run", ""),
        )
        totals[key] += int(float(m["value"]))
    return totals


def rejected_requests(text: str, *, priority_level: str) -> int:
    """Requests API Priority and Fairness rejected (429) at ``priority_level``, every reason summed."""
    found = 0
    for line in text.splitlines():
        m = _REJECTED.match(line)
        if m and dict(_LABEL.findall(m["labels"])).get("priority_level") == priority_level:
            found += int(float(m["value"]))
    return found


def writes(before: Counter[Key], after: Counter[Key], *, resources: set[str]) -> int:
    """Non-dry-run writes to the main resource (no subresource) of ``resources`` between two snapshots."""
    return sum(
        after[k] - before.get(k, 0)
        for k in after
        if k[0] in WRITE_VERBS and k[1] in resources and not k[2] and not k[3]
    )


def total(before: Counter[Key], after: Counter[Key], *, resources: set[str]) -> int:
    """Every request to ``resources`` between two snapshots (reads and dry-runs included)."""
    return sum(after[k] - before.get(k, 0) for k in after if k[1] in resources)


__all__ = ["WRITE_VERBS", "rejected_requests", "request_totals", "total", "writes"]
