"""Garbage for a webhook receiver, at a paced rate, from its own process (test infrastructure).

    python -m tests.install.flood --port 8080 --rate 1000 --seconds 30

Raw asyncio sockets (an HTTP client library costs more CPU per request than the server
spends answering, and the machine has 2 cores). ``--connections`` keep-alive
connections share one schedule: request ``i`` is sent at ``start + i / rate`` or as
soon as a connection is free after that, until ``seconds`` have passed (requests the
schedule still owes then are not sent: ``sent`` below ``rate * seconds`` means the
server, or this process, could not keep up). The requests rotate through:

- a GitHub push with a forged signature (401),
- a GitLab push with a wrong token (401),
- a body from no provider (401),
- random bytes with a forged signature (401),
- a declared body over 1 MiB, none sent (413, then the connection is dropped),
- bytes that are not HTTP (400 from the parser, connection closed),
- a GET of a path that does not exist (404).

Prints one JSON line: requests sent, answers by status, connection errors, the
achieved rate and the duration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections import Counter

_KINDS = ("forged-github", "wrong-gitlab", "anonymous", "random-bytes", "oversized", "not-http", "unknown-path")
_DROPS = frozenset({"oversized", "not-http"})
"""Kinds after which the server closes the connection."""


def request(kind: str, n: int) -> bytes:
    def post(headers: dict[str, str], body: bytes) -> bytes:
        lines = ["POST /webhook HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    push = json.dumps({"ref": "refs/heads/main", "n": n, "pad": "x" * (n % 512)}).encode()
    if kind == "forged-github":
        return post(
            {"X-GitHub-Event": "push", "X-GitHub-Delivery": f"flood-{n}", "X-Hub-Signature-256": "sha256=" + "0" * 64},
            push,
        )
    if kind == "wrong-gitlab":
        return post({"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": f"guess-{n}"}, push)
    if kind == "anonymous":
        return post({"Content-Type": "application/json"}, push)
    if kind == "random-bytes":
        return post({"X-Hub-Signature-256": f"sha256={os.urandom(32).hex()}"}, os.urandom(64 + n % 1024))
    if kind == "oversized":
        return b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nX-GitHub-Event: push\r\nContent-Length: 5000000\r\n\r\n"
    if kind == "not-http":
        return os.urandom(48).replace(b"\n", b"?") + b"\r\n\r\n"
    return f"GET /nothing-{n} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


async def answer(reader: asyncio.StreamReader) -> int:
    """The status of one response (its body read and discarded)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if length:
        await reader.readexactly(length)
    return status


async def flood(*, port: int, rate: float, seconds: float, connections: int) -> dict[str, object]:
    statuses: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    sent = 0
    attempted = 0
    start = time.monotonic()
    end = start + seconds

    async def worker() -> None:
        nonlocal sent, attempted
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while True:
            n = sent
            sent += 1
            due = start + n / rate
            if due >= end or time.monotonic() >= end:
                break  # the flood lasts ``seconds``; what could not be sent by then is not sent
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            kind = _KINDS[n % len(_KINDS)]
            attempted += 1
            try:
                if conn is None:
                    conn = await asyncio.open_connection("127.0.0.1", port)
                reader, writer = conn
                writer.write(request(kind, n))
                await writer.drain()
                statuses[str(await asyncio.wait_for(answer(reader), 10))] += 1
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError) as err:
                errors[type(err).__name__] += 1
                kind = "not-http"  # drop the connection
            if kind in _DROPS and conn is not None:
                conn[1].close()
                conn = None
        if conn is not None:
            conn[1].close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    took = time.monotonic() - start
    answered = sum(statuses.values())
    return {
        "sent": attempted,
        "answered": answered,
        "statuses": dict(statuses),
        "errors": dict(errors),
        "seconds": round(took, 2),
        "rate": round(answered / took, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--rate", type=float, default=1000.0, help="requests per second to aim at")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--connections", type=int, default=32, help="keep-alive connections (the server serves 64)")
    args = parser.parse_args()
    result = asyncio.run(flood(port=args.port, rate=args.rate, seconds=args.seconds, connections=args.connections))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
