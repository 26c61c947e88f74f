"""Git hosts' HTTP APIs (adapter layer): commit statuses on GitHub, GitLab and Gitea/Forgejo.

    where = providers.target("https://github.com/org/fleet.git")     # Target(github, api.github.com, org/fleet)
    poster = Poster(target=where, token_file=Path("/etc/fleet/commit-status/token"))
    task_group.start_soon(poster.run)
    poster.submit(CommitStatus(sha=..., context="fleet/gpu-east", state="success", description="applied 412 objects"))

``providers`` holds each API's request and answer as pure functions; ``posters`` sends
them beside the reconcile (bounded, coalescing, retried); ``readers`` reads a commit's
statuses back (rollout waves: what the earlier waves posted), kept for a TTL in a bounded
cache; ``errors`` is the typed tree.
This adapter sits beside ``fleet.kube``, ``fleet.source`` and ``fleet.helm`` and imports none
of them.
"""

from __future__ import annotations

from fleet.hosts.errors import Forbidden, HostError, Invalid, NotFound, RateLimited, Unauthorized, Unreachable
from fleet.hosts.posters import Poster
from fleet.hosts.providers import PROVIDERS, CommitStatus, Posted, Provider, State, Target, target
from fleet.hosts.readers import Reader

__all__ = [
    "PROVIDERS",
    "CommitStatus",
    "Forbidden",
    "HostError",
    "Invalid",
    "NotFound",
    "Posted",
    "Poster",
    "Provider",
    "RateLimited",
    "Reader",
    "State",
    "Target",
    "Unauthorized",
    "Unreachable",
    "target",
]
