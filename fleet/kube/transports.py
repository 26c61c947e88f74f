# ruff: noqa: ASYNC109 - the timeout parameters are httpcore2's network-backend interface
"""The client's HTTP connections: httpx's API over httpcore2's connection pool.

httpx 0.28's pool (httpcore 1.0) re-examines every pooled connection each time a request
arrives or ends: a keep-alive count that walks the pool once per idle connection (quadratic)
and a readability check of each idle connection that builds the TLS and socket streams'
attribute tables (a ``getpeername`` among them) to find the raw socket. With 16 writes in
flight, as ``fleetctl import``'s take-over and every large apply run, that bookkeeping was the
largest share of fleet's CPU, on a machine whose API server wants the same cores.

httpcore2 (pydantic's maintained fork of httpcore) assigns requests in one pass over the pool.
``Transport`` is the adapter httpx's own transport is, over httpcore2's pool: httpx's requests,
responses, timeouts and exception types stay what the rest of fleet (and kr8s) use. ``Backend``
wraps the pool's network backend so that a connection finds its socket once and its
readability check is one ``poll``.

``session`` builds the authenticated ``httpx.AsyncClient`` from kr8s's credentials (server,
bearer token, TLS from the kubeconfig or the pod), on a ``Transport``. Where a proxy applies (the
kubeconfig's ``proxy-url``, or ``HTTPS_PROXY`` not bypassed by ``NO_PROXY``) it is httpx's own
transport, which speaks to proxies.
"""

from __future__ import annotations

import contextlib
import select
import ssl
import typing
import urllib.request
from collections.abc import AsyncIterator, Iterator

import httpcore2
import httpx

Option = typing.Any
"""A socket option as httpcore2 passes it through (``(level, name, value)``)."""

MAX_CONNECTIONS = 100
MAX_KEEPALIVE = 20
KEEPALIVE_EXPIRY = 5.0
"""httpx's defaults (``httpx.Limits()``): what kr8s's session had."""


def readable(sock: typing.Any) -> bool:
    """Whether a read on ``sock`` would return at once (data, or the ``b""`` of a closed peer);
    a socket without a descriptor reads as closed, as httpcore2's own check says."""
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class Stream(httpcore2.AsyncNetworkStream):
    """One connection: the wrapped stream, and its socket found once."""

    def __init__(self, inner: httpcore2.AsyncNetworkStream) -> None:
        self.inner = inner
        self.socket = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self.inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self.inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.AsyncNetworkStream:
        return Stream(await self.inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "is_readable" and self.socket is not None:
            return readable(self.socket)
        return self.inner.get_extra_info(info)


class Backend(httpcore2.AsyncNetworkBackend):
    """``inner`` (httpcore2's anyio backend), its streams wrapped in ``Stream``."""

    def __init__(self, inner: httpcore2.AsyncNetworkBackend | None = None) -> None:
        self.inner = inner if inner is not None else httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[Option] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return Stream(await self.inner.connect_tcp(host, port, timeout, local_address, socket_options))

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: typing.Iterable[Option] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        return Stream(await self.inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


# httpcore2's errors as httpx's, most specific first (as httpx maps httpcore's)
_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore2.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore2.ReadTimeout, httpx.ReadTimeout),
    (httpcore2.WriteTimeout, httpx.WriteTimeout),
    (httpcore2.PoolTimeout, httpx.PoolTimeout),
    (httpcore2.TimeoutException, httpx.TimeoutException),
    (httpcore2.ConnectError, httpx.ConnectError),
    (httpcore2.ReadError, httpx.ReadError),
    (httpcore2.WriteError, httpx.WriteError),
    (httpcore2.NetworkError, httpx.NetworkError),
    (httpcore2.ProxyError, httpx.ProxyError),
    (httpcore2.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore2.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore2.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore2.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def mapped_errors() -> Iterator[None]:
    """httpcore2's exceptions raised as httpx's (what fleet's and kr8s's handlers catch)."""
    try:
        yield
    except Exception as exc:
        for theirs, ours in _ERRORS:
            if isinstance(exc, theirs):
                raise ours(str(exc)) from exc
        raise


class _Body(httpx.AsyncByteStream):
    """A response body from the pool, its errors mapped."""

    def __init__(self, inner: typing.AsyncIterable[bytes]) -> None:
        self.inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with mapped_errors():
            async for part in self.inner:
                yield part

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            with mapped_errors():
                await close()


class Transport(httpx.AsyncBaseTransport):
    """httpx's transport interface over one httpcore2 pool (``Backend`` for its sockets)."""

    def __init__(self, *, ssl_context: ssl.SSLContext) -> None:
        self.pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_KEEPALIVE,
            keepalive_expiry=KEEPALIVE_EXPIRY,
            network_backend=Backend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        sent = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with mapped_errors():
            answer = await self.pool.handle_async_request(sent)
        assert isinstance(answer.stream, typing.AsyncIterable)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream),
            extensions=answer.extensions,
        )

    async def aclose(self) -> None:
        await self.pool.aclose()


def proxied(server: str, *, proxy: str | None) -> bool:
    """Whether requests to ``server`` go through a proxy: the kubeconfig's ``proxy-url``, or the
    environment's proxy for its scheme (``HTTPS_PROXY``, ``ALL_PROXY``) unless ``NO_PROXY`` names
    its host, a domain above it, or ``*``."""
    if proxy:
        return True
    url = httpx.URL(server)
    found = urllib.request.getproxies_environment()
    if not (found.get(url.scheme) or found.get("all")):
        return False
    host = url.host.lower()
    for entry in found.get("no", "").split(","):
        name = entry.strip().lower().rsplit(":", 1)[0] if "]" not in entry else entry.strip().lower()
        name = name.lstrip(".")
        if name == "*" or (name and (host == name or host.endswith("." + name))):
            return False
    return True


async def session(auth: typing.Any, *, timeout: httpx.Timeout, user_agent: str) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` authenticated as kr8s's ``auth`` says (server, bearer token, client
    certificate and CA): on a ``Transport``, or where a proxy applies (``proxied``) on httpx's own
    transport, which honours the kubeconfig's ``proxy-url`` and the environment as kr8s's session did."""
    server = str(auth.server)
    verify = await auth.ssl_context()
    context = verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify=bool(verify))
    headers = {"User-Agent": user_agent, "Content-Type": "application/json"}
    if auth.token:
        headers["Authorization"] = f"Bearer {auth.token}"
    if proxied(server, proxy=auth.proxy):
        return httpx.AsyncClient(
            base_url=server, headers=headers, timeout=timeout, follow_redirects=True, verify=context, proxy=auth.proxy
        )
    return httpx.AsyncClient(
        base_url=server,
        headers=headers,
        timeout=timeout,
        follow_redirects=True,
        transport=Transport(ssl_context=context),
    )


__all__ = ["Backend", "Stream", "Transport", "mapped_errors", "proxied", "readable", "session"]
