"""Webhook verification and parsing, as pure functions over headers and body bytes."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from fleet.controller import webhooks
from fleet.controller.webhooks import Deliveries, receive

SECRET = b"hook-secret"


def github(payload: object, *, event: str = "push", delivery: str = "d-1", secret: bytes = SECRET) -> dict[str, object]:
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    headers = {"X-GitHub-Event": event, "X-Hub-Signature-256": signature, "X-GitHub-Delivery": delivery}
    return {"headers": headers, "body": body}


def gitlab(
    payload: object, *, event: str = "Push Hook", token: str = "hook-secret", uuid: str = "u-1"
) -> dict[str, object]:
    headers = {"X-Gitlab-Event": event, "X-Gitlab-Token": token, "X-Gitlab-Event-UUID": uuid}
    return {"headers": headers, "body": json.dumps(payload).encode()}


def call(
    request: dict[str, object], *, ref: str | None = "main", deliveries: Deliveries | None = None
) -> webhooks.Verdict:
    return receive(
        headers=request["headers"],  # type: ignore[arg-type]
        body=request["body"],  # type: ignore[arg-type]
        secret=SECRET,
        ref=ref,
        deliveries=deliveries or Deliveries(),
    )


def test_github_push_to_the_followed_branch() -> None:
    verdict = call(github({"ref": "refs/heads/main"}))
    assert (verdict.status, verdict.result, verdict.ref) == (202, "accepted", "refs/heads/main")
    assert verdict.triggers


def test_github_bad_or_missing_signature() -> None:
    request = github({"ref": "refs/heads/main"}, secret=b"other")
    assert call(request).status == 401
    headers = dict(request["headers"])  # type: ignore[call-overload]
    del headers["X-Hub-Signature-256"]
    assert call({"headers": headers, "body": request["body"]}).result == "unauthorized"
    headers["X-Hub-Signature"] = "sha1=" + hmac.new(SECRET, request["body"], hashlib.sha1).hexdigest()  # type: ignore[arg-type]
    assert call({"headers": headers, "body": request["body"]}).status == 401, "SHA-1 signatures are not accepted"


def test_github_tampered_body() -> None:
    request = github({"ref": "refs/heads/main"})
    request["body"] = json.dumps({"ref": "refs/heads/evil"}).encode()
    assert call(request).status == 401


def test_headers_are_case_insensitive() -> None:
    request = github({"ref": "refs/heads/main"})
    request["headers"] = {k.lower(): v for k, v in request["headers"].items()}  # type: ignore[attr-defined]
    assert call(request).result == "accepted"


def test_gitlab_token() -> None:
    assert call(gitlab({"ref": "refs/heads/main"})).result == "accepted"
    assert call(gitlab({"ref": "refs/heads/main"}, token="nope")).status == 401
    assert call(gitlab({"ref": "refs/tags/main"}, event="Tag Push Hook")).result == "accepted"


def gitea(payload: object, *, secret: bytes = SECRET, forgejo: bool = False) -> dict[str, object]:
    """A delivery as Gitea sends it: its own bare-hex signature, and GitHub's headers beside it."""
    body = json.dumps(payload, indent=2).encode()
    signature = hmac.new(secret, body, hashlib.sha256).hexdigest()
    prefix = "X-Forgejo" if forgejo else "X-Gitea"
    headers = {
        f"{prefix}-Event": "push",
        f"{prefix}-Delivery": "g-1",
        f"{prefix}-Signature": signature,
        "X-GitHub-Event": "push",
        "X-Hub-Signature-256": "sha256=" + signature,
    }
    return {"headers": headers, "body": body}


def test_gitea_signature_is_its_own() -> None:
    assert call(gitea({"ref": "refs/heads/main"})).result == "accepted"
    assert call(gitea({"ref": "refs/heads/main"}, forgejo=True)).result == "accepted"
    wrong = gitea({"ref": "refs/heads/main"}, secret=b"other")
    verdict = call(wrong)
    assert (verdict.status, verdict.reason) == (401, "missing or wrong X-Gitea-Signature")
    forged = gitea({"ref": "refs/heads/main"})
    headers = dict(forged["headers"])  # type: ignore[call-overload]
    headers["X-Gitea-Signature"] = "0" * 64  # a valid GitHub copy does not rescue a wrong Gitea signature
    assert call({"headers": headers, "body": forged["body"]}).status == 401


def test_unknown_sender_is_unauthorized() -> None:
    verdict = call({"headers": {"Content-Type": "application/json"}, "body": b'{"ref": "refs/heads/main"}'})
    assert verdict.status == 401 and not verdict.triggers


def test_push_to_another_ref_is_ignored() -> None:
    verdict = call(github({"ref": "refs/heads/feature"}))
    assert (verdict.status, verdict.result) == (202, "ignored")
    assert not verdict.triggers
    assert "refs/heads/feature" in verdict.reason


def test_other_events_are_ignored() -> None:
    assert call(github({"zen": "hi"}, event="ping")).result == "ignored"
    assert call(gitlab({"object_kind": "issue"}, event="Issue Hook")).result == "ignored"


def test_malformed_push() -> None:
    request = github({"ref": "refs/heads/main"})
    body = b"not json"
    request["body"] = body
    request["headers"]["X-Hub-Signature-256"] = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()  # type: ignore[index]
    assert call(request).status == 400
    assert call(github({"no": "ref"})).status == 400


def test_replayed_delivery_is_refused() -> None:
    seen = Deliveries()
    assert call(github({"ref": "refs/heads/main"}, delivery="abc"), deliveries=seen).result == "accepted"
    verdict = call(github({"ref": "refs/heads/main"}, delivery="abc"), deliveries=seen)
    assert (verdict.status, verdict.result, verdict.ref) == (409, "replayed", None)
    assert call(gitlab({"ref": "refs/heads/main"}, uuid="abc"), deliveries=seen).result == "accepted", (
        "ids are per provider"
    )


def test_unverified_requests_do_not_record_delivery_ids() -> None:
    seen = Deliveries()
    assert call(github({"ref": "refs/heads/main"}, delivery="x", secret=b"bad"), deliveries=seen).status == 401
    assert call(github({"ref": "refs/heads/main"}, delivery="x"), deliveries=seen).result == "accepted"


def test_deliveries_are_bounded() -> None:
    seen = Deliveries(size=3)
    for delivery in "abcd":
        assert not seen.seen(delivery)
    assert not seen.seen("a"), "the oldest id was forgotten"
    assert seen.seen("d")


def test_body_over_the_limit() -> None:
    request = github({"ref": "refs/heads/main", "pad": "x" * webhooks.MAX_BODY})
    assert call(request).status == 413


@pytest.mark.parametrize(
    ("pushed", "followed", "default", "expected"),
    [
        ("refs/heads/main", "main", None, True),
        ("refs/heads/main", "refs/heads/main", None, True),
        ("refs/tags/v1", "v1", None, True),
        ("refs/heads/mainline", "main", None, False),
        ("refs/heads/main", None, "main", True),
        ("refs/heads/dev", None, "main", False),
        ("refs/heads/dev", None, None, True),
    ],
)
def test_matches(pushed: str, followed: str | None, default: str | None, expected: bool) -> None:
    assert webhooks.matches(pushed=pushed, followed=followed, default_branch=default) is expected


def test_head_follows_the_payload_default_branch() -> None:
    payload = {"ref": "refs/heads/dev", "repository": {"default_branch": "main"}}
    assert call(github(payload), ref=None).result == "ignored"
    payload = {"ref": "refs/heads/trunk", "project": {"default_branch": "trunk"}}
    assert call(gitlab(payload), ref=None).result == "accepted"


def test_constant_time_comparison_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(webhooks.hmac, "compare_digest", spy)
    call(github({"ref": "refs/heads/main"}))
    call(gitlab({"ref": "refs/heads/main"}))
    assert len(calls) == 2


def test_replay_with_a_fresh_delivery_id_is_refused() -> None:
    """GitHub signs the body only: a captured push resent under a new delivery id still verifies,
    so the body itself is remembered too."""
    seen = Deliveries()
    captured = github({"ref": "refs/heads/main", "after": "1" * 40}, delivery="real")
    assert call(captured, deliveries=seen).result == "accepted"
    forged = dict(captured["headers"])  # type: ignore[call-overload]
    forged["X-GitHub-Delivery"] = "attacker-chosen"
    verdict = call({"headers": forged, "body": captured["body"]}, deliveries=seen)
    assert (verdict.status, verdict.result, verdict.ref) == (409, "replayed", None)
    del forged["X-GitHub-Delivery"]
    assert call({"headers": forged, "body": captured["body"]}, deliveries=seen).status == 409, "no id, same body"
    assert call(github({"ref": "refs/heads/main", "after": "2" * 40}, delivery="next"), deliveries=seen).triggers


def test_gitlab_replay_without_its_uuid_is_refused() -> None:
    seen = Deliveries()
    assert call(gitlab({"ref": "refs/heads/main", "checkout_sha": "a" * 40}, uuid="u-9"), deliveries=seen).triggers
    again = gitlab({"ref": "refs/heads/main", "checkout_sha": "a" * 40}, uuid="")
    assert call(again, deliveries=seen).result == "replayed"
