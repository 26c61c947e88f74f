"""fleet's httpx session over httpcore2's pool (fleet.kube.transports): requests, errors, proxies.

Pure and local: a loopback socket server stands in for nothing Kubernetes-specific (the
whole suite's cluster tests go through this transport against the real API server).
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

import anyio
import anyio.abc
import httpcore2
import httpx
import pytest

from fleet.kube import transports


def test_a_quiet_socket_is_not_readable_and_one_with_data_or_closed_is() -> None:
    a, b = socket.socketpair()
    try:
        assert not transports.readable(a)
        b.send(b"x")
        assert transports.readable(a)
        a.recv(1)
        assert not transports.readable(a)
        b.close()
        assert transports.readable(a)  # the b"" of a closed peer is waiting
    finally:
        a.close()
    assert transports.readable(a)  # no descriptor: read as closed, as httpcore2 does
    assert transports.readable(None)


class _Inner(httpcore2.AsyncNetworkStream):
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.asked: list[str] = []

    def get_extra_info(self, info: str) -> Any:
        self.asked.append(info)
        return self.sock if info == "socket" else f"inner {info}"


def test_a_stream_answers_readability_from_the_socket_it_found_once_and_passes_the_rest_on() -> None:
    a, b = socket.socketpair()
    try:
        inner = _Inner(a)
        stream = transports.Stream(inner)
        assert [stream.get_extra_info("is_readable") for _ in range(3)] == [False, False, False]
        b.close()
        assert stream.get_extra_info("is_readable") is True
        assert stream.get_extra_info("ssl_object") == "inner ssl_object"
        assert inner.asked == ["socket", "ssl_object"]
    finally:
        a.close()


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=transports.Transport(ssl_context=ssl.create_default_context()))


def test_requests_reuse_one_connection_and_carry_method_path_headers_and_body() -> None:
    seen: list[bytes] = []
    connections = 0

    async def main() -> None:
        async def serve(conn: anyio.abc.SocketStream) -> None:
            nonlocal connections
            connections += 1
            async with conn:
                while True:
                    try:
                        data = await conn.receive()
                    except anyio.EndOfStream:
                        return
                    seen.append(data)
                    await conn.send(b"HTTP/1.1 201 Created\r\nX-Seen: yes\r\nContent-Length: 2\r\n\r\nok")

        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tg, _client() as client:
            tg.start_soon(listener.serve, serve)
            for i in range(3):  # the second and third reuse the idle connection the pool checked
                response = await client.patch(
                    f"http://127.0.0.1:{port}/api/v1/x?dryRun=All", content=b"{}", headers={"X-N": str(i)}
                )
                assert (response.status_code, response.text, response.headers["x-seen"]) == (201, "ok", "yes")
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert connections == 1
    assert seen[0].startswith(b"PATCH /api/v1/x?dryRun=All HTTP/1.1\r\n")
    assert b"\r\nX-N: 0\r\n" in seen[0] and seen[0].endswith(b"\r\n\r\n{}")


def test_a_refused_connection_and_a_cut_answer_raise_httpx_errors() -> None:
    async def main() -> None:
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        async with _client() as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(f"http://127.0.0.1:{port}/")

        async def cut(conn: anyio.abc.SocketStream) -> None:
            async with conn:
                if b"/slow" in await conn.receive():
                    await anyio.sleep_forever()  # a server that never answers
                await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")

        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tg, _client() as client:
            tg.start_soon(listener.serve, cut)
            with pytest.raises(httpx.RemoteProtocolError) as raised:
                await client.get(f"http://127.0.0.1:{port}/")
            assert isinstance(raised.value, httpx.TransportError)
            assert isinstance(raised.value.__cause__, httpcore2.RemoteProtocolError)
            with pytest.raises(httpx.ReadTimeout):
                await client.get(f"http://127.0.0.1:{port}/slow", timeout=httpx.Timeout(5, read=0.2))
            tg.cancel_scope.cancel()

    anyio.run(main)


@pytest.mark.parametrize(
    ("env", "proxy", "expected"),
    [
        ({}, None, False),
        ({}, "http://proxy:3128", True),
        ({"HTTPS_PROXY": "http://proxy:3128"}, None, True),
        ({"https_proxy": "http://proxy:3128", "NO_PROXY": "api.example"}, None, False),
        ({"https_proxy": "http://proxy:3128", "NO_PROXY": "localhost,.example"}, None, False),
        ({"https_proxy": "http://proxy:3128", "NO_PROXY": "*"}, None, False),
        ({"https_proxy": "http://proxy:3128", "NO_PROXY": "other.example,api.example.org"}, None, True),
        ({"HTTP_PROXY": "http://proxy:3128"}, None, False),  # only for http:// servers
        ({"ALL_PROXY": "http://proxy:3128"}, None, True),
    ],
)
def test_a_proxy_is_left_to_httpx_own_transport(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], proxy: str | None, expected: bool
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert transports.proxied("https://api.example:6443", proxy=proxy) is expected


@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        {"fieldManager": "fleet", "force": "true", "dryRun": "All"},
        {"labelSelector": "app in (a, b),!gone", "fieldSelector": "spec.nodeName=gpu-01", "limit": "500"},
        {"continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzfQ==/+x"},
    ],
)
def test_a_query_made_by_the_client_is_the_one_httpx_makes_from_params(params: dict[str, str] | None) -> None:
    from fleet.kube.clients import _target

    by_httpx = httpx.Request("GET", "https://api.example:6443/apis/x", params=params).url
    assert httpx.URL("https://api.example:6443" + _target("/apis/x", params)) == by_httpx


class _Auth:
    """kr8s's KubeAuth as ``session`` reads it."""

    def __init__(self, server: str, proxy: str | None) -> None:
        self.server, self.proxy, self.token = server, proxy, "t0ken"

    async def ssl_context(self) -> bool:
        return True


def test_a_kubeconfig_proxy_url_carries_the_requests_and_no_proxy_goes_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    seen: list[bytes] = []

    async def main() -> None:
        async def serve(conn: anyio.abc.SocketStream) -> None:
            async with conn:
                seen.append(await conn.receive())
                await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")

        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        timeout = httpx.Timeout(5)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, serve)
            proxied = await transports.session(
                _Auth("http://api.invalid:6443", f"http://127.0.0.1:{port}"), timeout=timeout, user_agent="fleet"
            )
            async with proxied:
                assert not isinstance(proxied._transport, transports.Transport)
                assert (await proxied.get("/version")).json() == {}
            direct = await transports.session(_Auth(f"http://127.0.0.1:{port}", None), timeout=timeout, user_agent="f")
            async with direct:
                assert isinstance(direct._transport, transports.Transport)
                assert (await direct.get("/version")).json() == {}
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert seen[0].startswith(b"GET http://api.invalid:6443/version HTTP/1.1\r\n")  # absolute form: to a proxy
    assert b"\r\nAuthorization: Bearer t0ken\r\n" in seen[0]
    assert seen[1].startswith(b"GET /version HTTP/1.1\r\n")
