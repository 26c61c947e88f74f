"""Bearer tokens, checked by the API server: the console's door for programs and ``kubectl proxy`` set-ups.

The console does not read a token itself: a ServiceAccount token, a cloud's token or a
static one means whatever the API server's authenticators say it means. So each is sent
in a TokenReview (``authentication.k8s.io/v1``), as fleet's own identity (never an
impersonated viewer's: the review is fleet asking, and its ServiceAccount needs ``create``
on ``tokenreviews``, which the ClusterRole ``system:auth-delegator`` grants). The user
and groups the server answers are the viewer, impersonated as they are: a token that
authenticates as ``system:serviceaccount:...`` is that account, and RBAC bounds it.

A page of the console is several requests and a live page many more, each with the same
token; ``Reviews`` keeps recent answers (refusals too, so a stream of garbage costs the
API server one review per token per minute) in an ``LRU`` keyed by the token's SHA-256,
never the token itself, so a memory dump of the console holds no credential.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

from fleet.console.viewers import Unauthenticated, Viewer
from fleet.kube import clients, errors
from fleet.lrus import LRU

PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
HINT = "send a valid, unexpired Kubernetes token as 'Authorization: Bearer TOKEN', or log in"


async def review(client: clients.Client, token: str, *, audiences: tuple[str, ...] = ()) -> Viewer:
    """The viewer the API server says ``token`` authenticates, or ``Unauthenticated``.

    ``audiences``, when given, are the ones the token must be issued for (the console's own,
    so that a token meant for another service is refused)."""
    if not token or not token.isascii() or any(c.isspace() for c in token):
        raise Unauthenticated("the bearer token is empty or malformed", where="Authorization", hint=HINT)
    spec: dict[str, Any] = {"token": token, **({"audiences": list(audiences)} if audiences else {})}
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
    try:
        answer = await client.impersonating("").request("POST", PATH, verb="create", body=body, where="TokenReview")
    except errors.Forbidden as exc:
        raise errors.Forbidden(
            f"fleet may not review tokens: {exc.what}",
            where=exc.where,
            hint="bind fleet's ServiceAccount to the ClusterRole system:auth-delegator",
        ) from exc
    status = answer.get("status") or {}
    user = status.get("user") or {}
    if not status.get("authenticated") or not user.get("username"):
        said = status.get("error") or "not authenticated"
        raise Unauthenticated(f"the API server refused the bearer token: {said}", where="TokenReview", hint=HINT)
    return Viewer(user=str(user["username"]), groups=tuple(str(g) for g in user.get("groups") or ()), expires=0.0,
                  via="token")  # fmt: skip


class Reviews:
    """``review`` with its recent answers kept: at most ``limit`` tokens, each for ``ttl`` seconds."""

    def __init__(
        self,
        client: clients.Client,
        *,
        limit: int = 256,
        ttl: float = 60.0,
        audiences: tuple[str, ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl = ttl
        self.audiences = audiences
        self.clock = clock
        self.answers: LRU[bytes, tuple[float, Viewer | Unauthenticated]] = LRU(limit)
        """By the token's SHA-256: when the answer was had, and the viewer or the refusal."""

    async def review(self, token: str) -> Viewer:
        key = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        kept = self.answers.get(key)
        if kept is not None and self.clock() - kept[0] < self.ttl:
            answer = kept[1]
        else:
            try:
                answer = await review(self.client, token, audiences=self.audiences)
            except Unauthenticated as refused:
                answer = refused
            self.answers[key] = (self.clock(), answer)
        if isinstance(answer, Unauthenticated):
            raise Unauthenticated(answer.what, where=answer.where, hint=answer.hint)
        return answer


__all__ = ["HINT", "PATH", "Reviews", "review"]
