"""Push webhooks from GitHub, GitLab and Gitea/Forgejo: verified, parsed, matched against the followed ref.

Pure functions over headers and body bytes; the HTTP server (``servers``) reads the
request and calls ``receive``. The answer is a ``Verdict``: the HTTP status to send,
a short ``result`` word (also the metric label), a human ``reason``, and the pushed
ref when the push should wake the source.

- **GitHub** signs the body with the shared secret: ``X-Hub-Signature-256:
  sha256=<hex HMAC-SHA256>``. Only that header is accepted (not the SHA-1 one).
- **GitLab** sends the secret itself: ``X-Gitlab-Token``.
- **Gitea** signs the body too, as bare hex: ``X-Gitea-Signature`` (Forgejo also sends it, and
  ``X-Forgejo-Signature`` with the same value). Gitea adds GitHub's headers as well; a request
  with ``X-Gitea-Event`` is judged by Gitea's own signature only, never by the GitHub copy.
- Both comparisons use ``hmac.compare_digest`` (constant time). A missing or wrong
  signature or token is a 401; a request from neither provider is a 401 too
  (nothing unauthenticated ever triggers a fetch).
- **Replays**: a verified delivery whose id (``X-GitHub-Delivery``,
  ``X-Gitlab-Event-UUID``, ``X-Gitea-Delivery``) *or whose body* was seen recently is refused with 409.
  The body counts because GitHub's signature covers the body only: a captured
  request replayed with a fresh delivery id still verifies, but its body (SHA-256)
  is the one already received. Two genuine pushes never share a body (it holds the
  before/after commits, timestamps and the pusher). ``Deliveries`` is a bounded set
  of recent keys; keys are recorded only *after* verification, so unauthenticated
  requests cannot push real ones out of it. The set lives in memory: a restarted
  controller accepts one replay of an old delivery, whose only effect is a fetch of
  the followed ref (a push payload's commit is never used).
- Events other than pushes (GitHub ``ping``, issues...) are accepted and ignored
  (202, so the provider does not mark the hook as failing); so is a push to
  another ref than the one followed. When the source follows the remote's HEAD
  (``ref=None``), a push to the payload's default branch matches, and any push does
  when the payload does not say which branch is the default.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_BODY = 1024 * 1024
"""Bodies above this (1 MiB) are refused with 413 (GitHub caps its payloads at 25 MB; a push of
a few commits is a few KB)."""


@dataclass(frozen=True)
class Verdict:
    """What to answer, and the ref to fetch when the push should wake the source."""

    status: int
    result: str
    """``accepted``, ``ignored``, ``unauthorized``, ``replayed``, ``too-large``, ``bad-request``, ``disabled``."""
    reason: str
    ref: str | None = None

    @property
    def triggers(self) -> bool:
        return self.ref is not None


class Deliveries:
    """The keys (ids, body digests) of the last verified deliveries, at most ``size`` (oldest forgotten first)."""

    def __init__(self, *, size: int = 4096) -> None:
        self.size = size
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def seen(self, delivery: str) -> bool:
        """True when ``delivery`` was recorded before; records it otherwise (thread-safe)."""
        with self._lock:
            if delivery in self._ids:
                return True
            self._ids[delivery] = None
            if len(self._ids) > self.size:
                self._ids.popitem(last=False)
            return False


def receive(
    *, headers: Mapping[str, str], body: bytes, secret: bytes, ref: str | None, deliveries: Deliveries
) -> Verdict:
    """Verify one webhook request and decide what it asks for; ``headers`` are matched case-insensitively."""
    lower = {k.lower(): v for k, v in headers.items()}
    if len(body) > MAX_BODY:
        return Verdict(413, "too-large", f"body over {MAX_BODY} bytes")
    if any(k in lower for k in ("x-gitea-event", "x-gitea-signature", "x-forgejo-event", "x-forgejo-signature")):
        provider = "gitea"
        signature = lower.get("x-gitea-signature") or lower.get("x-forgejo-signature", "")
        if not verify_gitea(signature=signature, body=body, secret=secret):
            return Verdict(401, "unauthorized", "missing or wrong X-Gitea-Signature")
        event = lower.get("x-gitea-event") or lower.get("x-forgejo-event", "")
        delivery = lower.get("x-gitea-delivery") or lower.get("x-forgejo-delivery", "")
        is_push = event == "push"
    elif "x-hub-signature-256" in lower or "x-github-event" in lower:
        provider = "github"
        if not verify_github(signature=lower.get("x-hub-signature-256", ""), body=body, secret=secret):
            return Verdict(401, "unauthorized", "missing or wrong X-Hub-Signature-256")
        event = lower.get("x-github-event", "")
        delivery = lower.get("x-github-delivery", "")
        is_push = event == "push"
    elif "x-gitlab-token" in lower or "x-gitlab-event" in lower:
        provider = "gitlab"
        if not verify_gitlab(token=lower.get("x-gitlab-token", ""), secret=secret):
            return Verdict(401, "unauthorized", "missing or wrong X-Gitlab-Token")
        event = lower.get("x-gitlab-event", "")
        delivery = lower.get("x-gitlab-event-uuid", "")
        is_push = event in ("Push Hook", "Tag Push Hook")
    else:
        return Verdict(401, "unauthorized", "no GitHub or Gitea signature, no GitLab token")
    keys = [f"{provider}:body:{hashlib.sha256(body).hexdigest()}"]
    if delivery:
        keys.append(f"{provider}:{delivery}")
    seen = [deliveries.seen(key) for key in keys]  # every key recorded, none short-circuited
    if any(seen):
        which = f"delivery {delivery}" if delivery and seen[-1] else "this payload"
        return Verdict(409, "replayed", f"{which} was already received (a replay); the provider need not resend it")
    if not is_push:
        return Verdict(202, "ignored", f"{provider} event {event or '(none)'} is not a push")
    try:
        payload = json.loads(body)
    except ValueError:
        return Verdict(400, "bad-request", "the push payload is not JSON")
    if not isinstance(payload, dict) or not isinstance(payload.get("ref"), str):
        return Verdict(400, "bad-request", "the push payload has no ref")
    pushed: str = payload["ref"]
    if not matches(pushed=pushed, followed=ref, default_branch=_default_branch(payload)):
        return Verdict(202, "ignored", f"push to {pushed}, following {ref or 'HEAD'}")
    return Verdict(202, "accepted", f"push to {pushed}", ref=pushed)


def verify_github(*, signature: str, body: bytes, secret: bytes) -> bool:
    """``sha256=<hex>`` equals HMAC-SHA256(secret, body), compared in constant time."""
    if not secret or not signature.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.strip().encode(errors="replace"))


def verify_gitea(*, signature: str, body: bytes, secret: bytes) -> bool:
    """Bare ``<hex>`` equals HMAC-SHA256(secret, body), compared in constant time."""
    if not secret or not signature:
        return False
    expected = hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.strip().lower().encode(errors="replace"))


def verify_gitlab(*, token: str, secret: bytes) -> bool:
    """The token equals the secret, compared in constant time."""
    return bool(secret) and bool(token) and hmac.compare_digest(token.encode(errors="replace"), secret)


def matches(*, pushed: str, followed: str | None, default_branch: str | None = None) -> bool:
    """Whether a push to ``pushed`` (``refs/heads/x``) moves the followed ref (``x``, ``refs/heads/x``, a tag)."""
    if followed is None:
        return default_branch is None or pushed == f"refs/heads/{default_branch}"
    if followed.startswith("refs/"):
        return pushed == followed
    return pushed in (f"refs/heads/{followed}", f"refs/tags/{followed}")


def _default_branch(payload: dict[str, Any]) -> str | None:
    for key in ("repository", "project"):
        section = payload.get(key)
        if isinstance(section, dict) and isinstance(section.get("default_branch"), str):
            branch: str = section["default_branch"]
            return branch
    return None


__all__ = ["MAX_BODY", "Deliveries", "Verdict", "matches", "receive", "verify_gitea", "verify_github", "verify_gitlab"]
