"""The controller's HTTP server: real uvicorn on a loopback port, real HTTP requests.

``/webhook`` answers 401 for a bad or missing signature, 413 past 1 MiB (also when the
body is streamed: the answer comes before the body ends), 202 for a push to another ref
without calling back, and 202 with a call-back for a good push; ``/metrics`` parses as
Prometheus text; ``/readyz`` flips when the controller says so; cancelling the task
group stops the server.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
import h11
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleet.controller import servers, webhooks
from fleet.controller.metrics import Metrics
from fleet.errors import FleetError

pytestmark = pytest.mark.anyio

SECRET = b"hook-secret"


@dataclass
class Running:
    client: httpx.AsyncClient
    port: int
    metrics: Metrics
    pushes: list[str] = field(default_factory=list)
    ready: list[bool] = field(default_factory=lambda: [False])


@pytest.fixture()
async def running(anyio_backend: str) -> AsyncIterator[Running]:
    metrics = Metrics()
    state = Running(client=None, port=0, metrics=metrics)  # type: ignore[arg-type]
    app = servers.build(
        metrics=metrics, ready=lambda: state.ready[0], on_push=state.pushes.append, secret=SECRET, ref="main"
    )
    async with anyio.create_task_group() as group:
        state.port = await group.start(functools.partial(servers.serve, app=app, host="127.0.0.1", port=0))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{state.port}", timeout=10) as client:
            state.client = client
            yield state
        group.cancel_scope.cancel()


def signed(payload: dict[str, object], *, delivery: str = "1", secret: bytes = SECRET) -> dict[str, object]:
    body = json.dumps(payload).encode()
    headers = {
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }
    return {"content": body, "headers": headers}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def test_good_push_calls_back(running: Running) -> None:
    response = await running.client.post("/webhook", **signed({"ref": "refs/heads/main"}))  # type: ignore[arg-type]
    assert response.status_code == 202
    assert response.json() == {"result": "accepted", "reason": "push to refs/heads/main"}
    assert running.pushes == ["refs/heads/main"]


async def test_bad_and_missing_signature_are_401(running: Running) -> None:
    bad = signed({"ref": "refs/heads/main"}, secret=b"wrong")
    assert (await running.client.post("/webhook", **bad)).status_code == 401  # type: ignore[arg-type]
    missing = {"X-GitHub-Event": "push"}
    assert (await running.client.post("/webhook", content=b"{}", headers=missing)).status_code == 401
    assert running.pushes == []


async def test_push_to_another_ref_is_ignored(running: Running) -> None:
    response = await running.client.post("/webhook", **signed({"ref": "refs/heads/feature"}))  # type: ignore[arg-type]
    assert response.status_code == 202 and response.json()["result"] == "ignored"
    assert running.pushes == []


async def test_replayed_delivery_is_409(running: Running) -> None:
    request = signed({"ref": "refs/heads/main"}, delivery="same")
    assert (await running.client.post("/webhook", **request)).status_code == 202  # type: ignore[arg-type]
    assert (await running.client.post("/webhook", **request)).status_code == 409  # type: ignore[arg-type]
    assert running.pushes == ["refs/heads/main"]


async def test_declared_body_over_1_mib_is_413(running: Running) -> None:
    request = signed({"ref": "refs/heads/main", "pad": "x" * webhooks.MAX_BODY})
    assert (await running.client.post("/webhook", **request)).status_code == 413  # type: ignore[arg-type]
    assert running.pushes == []


def _streamed_request(port: int, *, send: int) -> int:
    """Send ``send`` body bytes chunked *without ending the body*, then read the answer's status."""
    connection = h11.Connection(h11.CLIENT)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        head = h11.Request(
            method="POST",
            target="/webhook",
            headers=[("Host", "x"), ("Transfer-Encoding", "chunked"), ("X-GitHub-Event", "push")],
        )
        sock.sendall(connection.send(head) or b"")
        chunk = b"x" * 65536
        for _ in range(send // len(chunk)):
            sock.sendall(connection.send(h11.Data(data=chunk)) or b"")
        while True:
            connection.receive_data(sock.recv(65536))
            event = connection.next_event()
            if isinstance(event, h11.Response):
                return event.status_code


async def test_streamed_body_is_refused_while_reading(running: Running) -> None:
    status = await anyio.to_thread.run_sync(functools.partial(_streamed_request, running.port, send=2 * 1024 * 1024))
    assert status == 413, "answered before the body ended"
    assert running.pushes == []


async def test_health_and_readiness(running: Running) -> None:
    assert (await running.client.get("/healthz")).status_code == 200
    assert (await running.client.get("/readyz")).status_code == 503
    running.ready[0] = True
    assert (await running.client.get("/readyz")).status_code == 200


async def test_metrics_parse_and_count_webhooks(running: Running) -> None:
    await running.client.post("/webhook", **signed({"ref": "refs/heads/main"}, delivery="m1"))  # type: ignore[arg-type]
    await running.client.post("/webhook", **signed({"ref": "refs/heads/x"}, delivery="m2"))  # type: ignore[arg-type]
    await running.client.post("/webhook", content=b"{}", headers={"X-GitHub-Event": "push"})
    running.metrics.loop.leader.set(1)
    response = await running.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    found = samples(response.text)
    assert found[("fleet_webhook_requests_total", (("result", "accepted"),))] == 1
    assert found[("fleet_webhook_requests_total", (("result", "ignored"),))] == 1
    assert found[("fleet_webhook_requests_total", (("result", "unauthorized"),))] == 1
    assert found[("fleet_leader", ())] == 1
    openmetrics = await running.client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.rstrip().endswith("# EOF")


async def test_without_a_secret_the_webhook_is_disabled(anyio_backend: str) -> None:
    pushes: list[str] = []
    app = servers.build(metrics=Metrics(), ready=lambda: True, on_push=pushes.append, secret=None, ref="main")
    async with anyio.create_task_group() as group:
        port = await group.start(functools.partial(servers.serve, app=app, host="127.0.0.1", port=0))
        async with httpx.AsyncClient() as client:
            response = await client.post(f"http://127.0.0.1:{port}/webhook", **signed({"ref": "refs/heads/main"}))  # type: ignore[arg-type]
        group.cancel_scope.cancel()
    assert response.status_code == 404 and pushes == []


async def test_cancel_stops_the_server_and_busy_port_is_a_fleet_error(anyio_backend: str) -> None:
    app = servers.build(metrics=Metrics(), ready=lambda: True, on_push=lambda _: None, secret=SECRET, ref=None)
    async with anyio.create_task_group() as group:
        port = await group.start(functools.partial(servers.serve, app=app, host="127.0.0.1", port=0))
        with pytest.raises(FleetError) as caught:
            await servers.serve(app=app, host="127.0.0.1", port=port)
        assert caught.value.where == f"127.0.0.1:{port}"
        group.cancel_scope.cancel()
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"http://127.0.0.1:{port}/healthz")


def test_quiet_lets_one_line_through_per_period() -> None:
    now = [0.0]
    quiet = servers.Quiet(10.0, clock=lambda: now[0])
    assert quiet.allow() == 0
    assert [quiet.allow() for _ in range(5)] == [None] * 5
    now[0] = 10.0
    assert quiet.allow() == 5, "the next line tells how many were held back"
    assert quiet.allow() is None
    record = logging.LogRecord("uvicorn.error", logging.WARNING, "", 0, "Invalid HTTP request received.", None, None)
    now[0] = 20.0
    assert quiet.filter(record) and "1 more in the last 10s" in record.getMessage()
    assert not quiet.filter(record)


async def test_refused_requests_are_counted_but_not_each_logged(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fleet.controller.servers")
    for n in range(40):
        bad = signed({"ref": "refs/heads/main", "n": n}, secret=b"wrong")
        assert (await running.client.post("/webhook", **bad)).status_code == 401  # type: ignore[arg-type]
    good = await running.client.post("/webhook", **signed({"ref": "refs/heads/main"}))  # type: ignore[arg-type]
    assert good.status_code == 202
    lines = [r.getMessage() for r in caplog.records if r.name == "fleet.controller.servers"]
    assert len(lines) == 2, lines
    assert "401 unauthorized" in lines[0] and "202 accepted" in lines[1], "accepted ones are always logged"
    values = samples(running.metrics.render()[0].decode())
    assert values[("fleet_webhook_requests_total", (("result", "unauthorized"),))] == 40
