"""What the earlier rollout waves did with a revision, read from the git host's commit statuses.

There is no hub: each cluster's controller posts its outcome as commit status
``fleet/<cluster>`` (``fleet.hosts.posters``), and the controller of a cluster in wave *k* > 1
reads the earlier waves' statuses on the revision it is about to apply (``fleet.hosts.readers``),
turning them into the engine's ``waits.Reported``; ``fleet.engine.waits`` decides.

**A revision or a descendant.** A cluster of an earlier wave that applied a newer commit
has applied the revision's changes too, so its success there counts. The controller reads
the revision's own statuses: it plans the newest commit it fetched, so a descendant the
earlier cluster applied reaches this controller within a poll interval (at once with a
webhook), and it then asks about that commit itself. None of the three APIs lists the
commits a context was posted on, and the git source's cache repository is shallow
(``--depth=1``: each fetched head is a shallow boundary, so ``git merge-base --is-ancestor``
cannot tell a descendant there). The one case this leaves is a newest commit that does not
validate for this cluster while it did for the earlier one: the last good revision stays
enforced and its disruptive part waits until a commit valid for both arrives (it holds
longer, never releases early). ``read`` and ``combine`` take descendants already, for a
caller that can tell them (the host's compare API, a deepened fetch).

For each earlier cluster, a ``success`` on any of those commits counts (the one standing
longest, so the bake is not restarted by a later commit that also succeeded); without one,
the revision's own status, else the newest descendant's, is what the engine sees (a
``failure`` there halts the later waves).

Reads are bounded: the reader keeps each (SHA, context) answer for a TTL in an LRU, and the
controller stops reading a revision once its wave has let it go.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet import hosts
from fleet.engine import waits
from fleet.engine.plans import ChangeRules

CONTEXT = "fleet/{cluster}"
"""The commit status context each cluster's controller posts (``reports.Reporter.notify``)."""


def context_of(cluster: str) -> str:
    return CONTEXT.format(cluster=cluster)


async def read(
    *, reader: hosts.Reader | None, rules: ChangeRules, revision: str, descendants: Sequence[str] = ()
) -> waits.Reported:
    """The earlier waves' statuses for ``revision`` (and ``descendants`` of it, newest first, when the caller
    knows them); a read that fails, or statuses that are off, is ``Reported.error``: the engine then holds
    every disruptive change."""
    if reader is None:
        return waits.Reported(
            revision=revision,
            error="commit statuses are off: set --commit-status-token-file so that the controller can read them",
        )
    clusters = [name for names in rules.earlier for name in names]
    contexts = [context_of(c) for c in clusters]
    found: list[dict[str, hosts.Posted | None]] = []
    try:
        for sha in (revision, *descendants):
            found.append(await reader.statuses(sha, contexts=contexts))
    except hosts.HostError as err:
        return waits.Reported(revision=revision, error=f"{err.what} ({err.where})" if err.where else err.what)
    return combine(revision, found=found, clusters=clusters)


def combine(
    revision: str, *, found: Sequence[dict[str, hosts.Posted | None]], clusters: Sequence[str]
) -> waits.Reported:
    """Each cluster's report from the statuses ``found`` on the revision (first) and its descendants (pure)."""
    reports: dict[str, waits.Report] = {}
    for cluster in clusters:
        posted = [p for answer in found if (p := answer.get(context_of(cluster))) is not None]
        successes = sorted((p.at, i) for i, p in enumerate(posted) if p.state == "success" and p.at is not None)
        chosen = posted[successes[0][1]] if successes else (posted[0] if posted else None)
        if chosen is not None:
            reports[cluster] = waits.Report(
                state=chosen.state, sha=chosen.sha, since=chosen.at, description=chosen.description
            )
    return waits.Reported(revision=revision, clusters=reports)


def status(rules: ChangeRules, *, gate: waits.Wait | None, held: int = 0) -> dict[str, Any]:
    """FleetSync ``status.rollout``: the cluster's wave, the clusters it follows, what its wave waits for
    (""; the earlier waves let the revision go) and how many disruptive changes that holds."""
    return {
        "wave": rules.wave,
        "after": [name for names in rules.earlier for name in names],
        "bake": f"{int(rules.bake)}s" if rules.bake else "",
        "waitsFor": gate.reason if gate is not None else "",
        "until": gate.until.strftime("%Y-%m-%dT%H:%M:%SZ") if gate is not None and gate.until else "",
        "held": held,
    }


__all__ = ["CONTEXT", "combine", "context_of", "read", "status"]
