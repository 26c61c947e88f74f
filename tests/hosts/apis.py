"""A loopback HTTP server standing in for GitHub's, GitLab's and Gitea's commit status APIs.

These are SaaS APIs that cannot be reached from here (no network), so this server is a
test double: it records every request exactly as it arrived (method, path, headers,
body bytes) and answers what the test scripted, in order, then 201 with a JSON body like
the hosts' own. The tests check each recorded request against the API's documentation;
the double itself checks nothing, so a wrong request is a test failure, not a server
error.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased (HTTP header names are case-insensitive)."""
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Answer:
    status: int = 201
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b'{"id": 1, "state": "success"}'


@dataclass
class StatusAPI:
    """Records requests; answers ``script`` first (one Answer per request), then 201."""

    script: list[Answer] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    hold: threading.Event | None = None
    """While set to an unset Event, each request waits for it before answering (a held host)."""
    latency: float = 0.0
    """Seconds each answer waits (a host across the internet: bench/statuses.py)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def answer(self) -> Answer:
        with self.lock:
            return self.script.pop(0) if self.script else Answer()

    def wait_for(self, count: int, *, timeout: float = 10.0) -> list[Received]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= count, timeout=timeout)
            return list(self.received)

    @contextlib.contextmanager
    def serving(self) -> Iterator[str]:
        """Serve on 127.0.0.1; yields the base URL (``http://127.0.0.1:PORT``)."""
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                got = Received(
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                )
                with api.arrived:
                    api.received.append(got)
                    api.arrived.notify_all()
                if api.hold is not None:
                    api.hold.wait(timeout=30)
                if api.latency:
                    time.sleep(api.latency)
                answer = api.answer()
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, name="status-api", daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            if self.hold is not None:
                self.hold.set()
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)
