"""The one Kubernetes client fleet uses: kr8s for credentials, our own verbs on top.

kr8s reads kubeconfigs well (contexts, exec plugins, client certificates, tokens)
but has no server-side apply, no dry-run, no timeouts by default and retries 401/403
by re-authenticating three times (which would quadruple every Forbidden). So kr8s
reads the credentials (``KubeAuth``) and nothing else: the ``httpx`` session is fleet's own
(``fleet.kube.transports``), and every request goes through ``Client.request`` which

- sets an explicit timeout on every call (``timeout`` seconds per attempt);
- retries 429/5xx/connection loss with capped, jittered exponential backoff,
  waiting at least what ``Retry-After`` asked for (``retries.RetryPolicy``);
- turns every failure into a typed ``errors.KubeError`` with the original chained;
- counts requests by verb, so "a no-op reconcile writes nothing" is checkable from
  the client side too (the server-side proof reads ``apiserver_request_total``), and
  failed attempts by HTTP status (0: no answer), so a fault test can say how many
  429s or lost connections a run went through.

The verbs (get, list, apply, patch, create, update, delete, discover) are thin functions
over ``request``; ``update`` always carries the resourceVersion it read (never a blind write).

``impersonating(user)`` is the same connection sending ``Impersonate-User`` on every request
(kubectl's ``--as``): the API server then authorizes each request as that user, so RBAC bounds
what fleet writes for a team (``fleet.engine.impersonations``). It shares the session, the
discovered kinds and the request counts; only the header differs.
"""

from __future__ import annotations

import builtins
import copy
import json
import logging
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import anyio
import orjson

from fleet.exports import defer

# httpx imports its command-line client when rich and click are installed (rich is fleetctl's):
# pygments, click and the client itself, loaded at every command's start for a program fleet
# never runs. A None entry makes that one import fail, which httpx handles as an install
# without its ``cli`` extra (``httpx.main`` then only says the extra is missing).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
# kr8s imports these at its top for calls fleet never makes (exec and port-forward, kubeconfig
# queries, whoami): they load on first use instead (``fleet.exports.defer``).
defer("httpx_ws", "jsonpath", "cryptography.x509")

import httpx  # noqa: E402
from kr8s._auth import KubeAuth  # noqa: E402 - kr8s's kubeconfig, exec-plugin and service-account reader

from fleet.kube import errors, kinds, retries  # noqa: E402

logger = logging.getLogger(__name__)

WRITE_VERBS = frozenset({"apply", "create", "update", "patch", "delete"})
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
IMPERSONATE_USER = "Impersonate-User"
RETRYING = "retrying %s in %.2fs (Retry-After: %s) after: %s"
"""Logged before each retry: where, the wait, the server's Retry-After in seconds (None without one), why."""
DISCOVERY_ACCEPT = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"


@dataclass
class RequestCounts:
    """Requests sent, by verb; dry-runs are counted as ``<verb>-dry-run`` and are not writes.

    ``failed`` counts failed attempts (each retry is an attempt) by HTTP status, 0 when
    no answer came (connection refused or reset, timeout).
    """

    by_verb: Counter[str] = field(default_factory=Counter)
    failed: Counter[int] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.by_verb.values())

    @property
    def writes(self) -> int:
        return sum(n for verb, n in self.by_verb.items() if verb in WRITE_VERBS)

    def snapshot(self) -> dict[str, int]:
        return dict(sorted(self.by_verb.items()))


PAGE_SIZE = 1000
"""Objects per list request: larger than kubectl's 500, so a large listing makes fewer round
trips; larger pages than this saved no more time and raised the peak memory."""


@dataclass(frozen=True)
class ListResult:
    """All items of a (paginated) list, with ``apiVersion``/``kind`` filled in, and its resourceVersion."""

    items: list[dict[str, Any]]
    resource_version: str


class Client:
    """One authenticated connection to one cluster; create it with ``connect``."""

    def __init__(
        self, *, auth: Any, context: str, timeout: float, retry: retries.RetryPolicy, user_agent: str = ""
    ) -> None:
        self._auth = auth
        """kr8s's ``KubeAuth``: the server, token, certificates and CA the kubeconfig or pod gives."""
        self.context = context
        self.user_agent = user_agent
        """Sent as ``User-Agent`` when set: the API server's audit log then names who wrote."""
        self.timeout = timeout
        self.retry = retry
        self.counts = RequestCounts()
        self._kinds: dict[tuple[str, str], kinds.Kind] = kinds.builtin()
        self._discovered = False
        self.user = ""
        """The user every request impersonates ("" for the client's own identity)."""
        self._headers: dict[str, str] = {"User-Agent": user_agent} if user_agent else {}
        self._sessions = _Sessions(auth, timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)))
        """Shared by every ``impersonating`` view (a shallow copy): one pool of connections."""

    def impersonating(self, user: str) -> Client:
        """This connection acting as ``user`` (``Impersonate-User``); ``""`` gives the own identity back."""
        if user == self.user:
            return self
        view = copy.copy(self)  # the same credentials, session, kinds table and counts
        view.user = user
        view._headers = {k: v for k, v in self._headers.items() if k != IMPERSONATE_USER}
        if user:
            view._headers[IMPERSONATE_USER] = user
        return view

    @property
    def server(self) -> str:
        return str(self._auth.server)

    async def close(self) -> None:
        await self._sessions.close()

    # -- the one request path -------------------------------------------------------------

    async def _session(self, *, renew: bool = False) -> httpx.AsyncClient:
        """The authenticated httpx session every view of this connection shares (``_Sessions``)."""
        return await self._sessions.get(renew=renew)

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        params: dict[str, str] | None = None,
        read_timeout: float | None = None,
        where: str = "",
    ) -> AsyncIterator[httpx.Response]:
        """A streaming request (watch) with status mapped to typed errors; no retry here."""
        session = await self._session()
        timeout = httpx.Timeout(self.timeout, read=read_timeout)
        self.counts.by_verb[verb] += 1
        try:
            async with session.stream(
                method, _target(path, params), headers=self._agent(), timeout=timeout
            ) as response:
                if response.is_error:
                    self.counts.failed[response.status_code] += 1
                    await response.aread()
                    raise _error(response, where=where or path)
                yield response
        except httpx.TransportError as exc:
            self.counts.failed[0] += 1
            raise errors.Unreachable(
                f"lost the connection to {self.server}: {exc}",
                where=where or path,
                hint="check that the API server is running and reachable",
            ) from exc

    def _agent(self) -> dict[str, str]:
        return self._headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        verb: str,
        params: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        where: str = "",
        raw: bool = False,
        attempts: int | None = None,
    ) -> Any:
        """Send one request with timeouts and retries; the decoded JSON (or text if ``raw``).
        ``attempts`` caps the client's retries (an eviction refused with 429 is an answer, not throttling)."""
        content = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        target = _target(path, params)
        headers = {"Content-Type": content_type, "Accept": accept, **self._agent()}
        where = where or f"{method} {path}"
        attempt = 0
        renewed = False
        while True:
            attempt += 1
            self.counts.by_verb[verb] += 1
            failure: errors.KubeError
            retry_after: float | None = None
            try:
                session = await self._session()
                with anyio.fail_after(self.timeout):
                    response = await session.request(method, target, headers=headers, content=content)
                if not response.is_error:
                    return response.text if raw else (decoded(response.content) if response.content else {})
                self.counts.failed[response.status_code] += 1
                if response.status_code == 401 and not renewed:
                    renewed = True  # an expired exec/OIDC token: renew once, like kubectl
                    await self._session(renew=True)
                    continue
                retry_after = retries.retry_after_seconds(response.headers.get("Retry-After"))
                failure = _error(response, where=where, retry_after=retry_after or 0.0)
                if response.status_code not in retries.RETRIABLE_STATUS or isinstance(failure, errors.Invalid):
                    raise failure
            except (TimeoutError, httpx.TransportError) as exc:
                self.counts.failed[0] += 1
                failure = errors.Unreachable(
                    f"no answer from {self.server} within {self.timeout:g}s ({type(exc).__name__}: {exc})",
                    where=where,
                    hint="check that the API server is running, or raise --timeout",
                )
                failure.__cause__ = exc
            if attempt >= (attempts or self.retry.attempts):
                raise failure
            delay = self.retry.delay(attempt=attempt, retry_after=retry_after)
            logger.info(RETRYING, where, delay, retry_after, failure.what)
            await anyio.sleep(delay)

    # -- verbs ------------------------------------------------------------------------------

    async def kind(self, *, api_version: str, kind: str) -> kinds.Kind:
        """The ``Kind`` for an apiVersion/kind; asks discovery once for kinds fleet does not know."""
        found = self._kinds.get((api_version, kind))
        if found is None and not self._discovered:
            await self.discover()
            found = self._kinds.get((api_version, kind))
        if found is None:
            raise errors.NotFound(
                f"the server has no kind {kind} in {api_version}",
                where=self.context,
                hint="install the CRD or operator that provides it, or fix apiVersion/kind",
            )
        return found

    async def discover(self) -> list[kinds.Kind]:
        """Every kind the server serves (two aggregated-discovery requests: /api and /apis)."""
        found: list[kinds.Kind] = []
        for root in ("/api", "/apis"):
            document = await self.request("GET", root, verb="discovery", accept=DISCOVERY_ACCEPT)
            found.extend(kinds.from_discovery(document))
        for k in found:
            self._kinds.setdefault((k.api_version, k.kind), k)
        self._discovered = True
        return found

    async def get(self, ref: kinds.Ref) -> dict[str, Any]:
        k = await self.kind(api_version=ref.api_version, kind=ref.kind)
        path = k.path(namespace=ref.namespace, name=ref.name)
        result: dict[str, Any] = await self.request("GET", path, verb="get", where=str(ref))
        return result

    async def list(
        self,
        kind: kinds.Kind,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = PAGE_SIZE,
        each: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> ListResult:
        """Every object of ``kind`` (in ``namespace``, or all), following ``continue`` tokens (``PAGE_SIZE``).

        ``each`` maps every item as its page arrives (e.g. ``shapes.Shapes.share``), so a page's
        decoded objects are compacted before the next is read."""
        params: dict[str, str] = {"limit": str(page_size)}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        items: list[dict[str, Any]] = []
        path = kind.path(namespace=namespace)
        while True:
            page = await self.request("GET", path, verb="list", params=params, where=f"list {kind.group_kind}")
            for item in page.get("items") or ():
                item.setdefault("apiVersion", kind.api_version)
                item.setdefault("kind", kind.kind)
                items.append(each(item) if each is not None else item)
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return ListResult(items=items, resource_version=str(meta.get("resourceVersion", "")))
            params["continue"] = token

    async def list_if_served(
        self,
        *,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        each: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> builtins.list[dict[str, Any]]:  # ``list`` is the method above here
        """Every object of a kind, or ``[]`` when the server does not serve it: a CRD not installed
        (an operator's kinds before its first install), or removed since discovery."""
        try:
            k = await self.kind(api_version=api_version, kind=kind)
            listed = await self.list(
                k, namespace=namespace, label_selector=label_selector, field_selector=field_selector, each=each
            )
        except errors.NotFound:
            return []
        return listed.items

    async def apply(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str = "fleet",
        force: bool = False,
        dry_run: bool = False,
        subresource: str = "",
    ) -> dict[str, Any]:
        """Server-side apply ``obj`` as ``field_manager``; the object as stored (or as it would be)."""
        ref = kinds.Ref.of(obj)
        k = await self.kind(api_version=ref.api_version, kind=ref.kind)
        path = k.path(namespace=ref.namespace, name=ref.name) + (f"/{subresource}" if subresource else "")
        params = {"fieldManager": field_manager, "fieldValidation": "Strict"}
        if force:
            params["force"] = "true"
        if dry_run:
            params["dryRun"] = "All"
        result: dict[str, Any] = await self.request(
            "PATCH",
            path,
            verb="apply-dry-run" if dry_run else "apply",
            params=params,
            body=obj,
            content_type=APPLY_PATCH,
            where=str(ref),
        )
        return result

    async def create(self, obj: dict[str, Any], *, field_manager: str = "fleet") -> dict[str, Any]:
        """Create ``obj`` (POST); ``Conflict`` (AlreadyExists) when an object of that name exists."""
        ref = kinds.Ref.of(obj)
        k = await self.kind(api_version=ref.api_version, kind=ref.kind)
        result: dict[str, Any] = await self.request(
            "POST",
            k.path(namespace=ref.namespace),
            verb="create",
            params={"fieldManager": field_manager, "fieldValidation": "Strict"},
            body=obj,
            where=str(ref),
        )
        return result

    async def update(self, obj: dict[str, Any], *, field_manager: str = "fleet") -> dict[str, Any]:
        """Replace ``obj`` (PUT); its ``metadata.resourceVersion`` is the precondition (``Conflict`` when stale).

        For read-modify-write of objects fleet shares with other writers: the
        server refuses the write if anybody changed the object since it was read.
        """
        ref = kinds.Ref.of(obj)
        if not (obj.get("metadata") or {}).get("resourceVersion"):
            raise ValueError(f"update of {ref} without metadata.resourceVersion would be a blind write")
        k = await self.kind(api_version=ref.api_version, kind=ref.kind)
        result: dict[str, Any] = await self.request(
            "PUT",
            k.path(namespace=ref.namespace, name=ref.name),
            verb="update",
            params={"fieldManager": field_manager, "fieldValidation": "Strict"},
            body=obj,
            where=str(ref),
        )
        return result

    async def patch(self, ref: kinds.Ref, body: dict[str, Any], *, field_manager: str) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386) of ``ref``; put ``metadata.resourceVersion`` in ``body`` as a precondition."""
        k = await self.kind(api_version=ref.api_version, kind=ref.kind)
        result: dict[str, Any] = await self.request(
            "PATCH",
            k.path(namespace=ref.namespace, name=ref.name),
            verb="patch",
            params={"fieldManager": field_manager},
            body=body,
            content_type=MERGE_PATCH,
            where=str(ref),
        )
        return result

    async def delete(
        self,
        ref: kinds.Ref,
        *,
        propagation: str = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Delete ``ref``; ``uid``/``resource_version`` are preconditions (409 Conflict when stale)."""
        k = await self.kind(api_version=ref.api_version, kind=ref.kind)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        preconditions = {key: value for key, value in (("uid", uid), ("resourceVersion", resource_version)) if value}
        if preconditions:
            body["preconditions"] = preconditions
        if dry_run:
            body["dryRun"] = ["All"]
        result: dict[str, Any] = await self.request(
            "DELETE",
            k.path(namespace=ref.namespace, name=ref.name),
            verb="delete-dry-run" if dry_run else "delete",
            body=body,
            where=str(ref),
        )
        return result

    async def metrics(self) -> str:
        """The server's Prometheus text (``/metrics``), where ``apiserver_request_total`` lives."""
        text: str = await self.request("GET", "/metrics", verb="get", accept="text/plain", raw=True)
        return text

    async def version(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", "/version", verb="get")
        return result


USER_AGENT = "fleet"
"""Sent when the client is given none of its own (``connect(user_agent=...)``)."""
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_NO_KUBECONFIG = "/nonexistent/fleet-in-cluster/kubeconfig"


def in_cluster(*, service_account: str = SERVICE_ACCOUNT_DIR) -> bool:
    """Whether this process runs with a pod's in-cluster configuration (service host and token present)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.isfile(os.path.join(service_account, "token"))


def decoded(content: bytes | str) -> Any:
    """A response body (or a watch event's line) as Python data: by orjson (faster than json), whose
    cache of keys makes the keys of every decoded object one string each where json makes them per
    body (less memory for a process that watches many objects); what orjson refuses is read by
    json, which accepts more (lone surrogate escapes), so a body decodes whenever it did before."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)


class _Sessions:
    """The connection's httpx session (``fleet.kube.transports.session``), made from kr8s's
    credentials, once for every view of the connection."""

    def __init__(self, auth: Any, *, timeout: httpx.Timeout) -> None:
        self.auth = auth
        self.timeout = timeout
        self.session: httpx.AsyncClient | None = None

    async def get(self, *, renew: bool = False) -> httpx.AsyncClient:
        if renew:  # an expired exec/OIDC or service-account token: read the credentials again
            await self.auth.reauthenticate()
            await self.close()
        if self.session is None or self.session.is_closed:
            # imported here: httpcore2 reads its version from its dist-info (importlib.metadata) at
            # import, a cost only a command that connects should pay (not validate, not render)
            from fleet.kube import transports

            self.session = await transports.session(self.auth, timeout=self.timeout, user_agent=USER_AGENT)
        return self.session

    async def close(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await session.aclose()


def _tls_files(auth: Any, exc: BaseException) -> str:
    """The certificate, key and CA files the credentials name, where reading one failed without
    saying which (``ssl``'s errors carry no file name)."""
    if auth is None or not isinstance(exc, OSError) or exc.filename:
        return ""
    files = [str(f) for f in (auth.client_cert_file, auth.client_key_file, auth.server_ca_file) if f]
    return f" (reading {', '.join(dict.fromkeys(files))})" if files else ""


def _target(path: str, params: dict[str, str] | None) -> str:
    """``path`` with ``params`` as its query, encoded as httpx encodes ``params=``: given ``params=``
    (even empty), httpx parses the whole URL once more per request, a cost of every apply."""
    return f"{path}?{urlencode(params)}" if params else path


def _error(response: httpx.Response, *, where: str, retry_after: float = 0.0) -> errors.KubeError:
    body: object
    try:
        body = response.json()
    except ValueError:
        body = response.text.strip()
    return errors.from_status(status=response.status_code, body=body, where=where, retry_after=retry_after)


async def connect(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    timeout: float = 30.0,  # noqa: ASYNC109 - the per-request timeout the client keeps, not a wait
    retry: retries.RetryPolicy | None = None,
    service_account: str | None = None,
    user_agent: str = "",
) -> Client:
    """Open a client like kubectl: ``kubeconfig`` (else ``$KUBECONFIG``, else ~/.kube/config), ``context``.

    ``service_account`` (a directory holding ``token``, ``ca.crt`` and ``namespace``,
    in a pod ``SERVICE_ACCOUNT_DIR``) connects with the in-cluster configuration
    instead: ``KUBERNETES_SERVICE_HOST``/``PORT`` and that token, re-read when it
    expires (a 401 renews the credentials). Checks the server answers (``/version``)
    within ``timeout`` seconds; every later request gets the same timeout per attempt.
    ``user_agent`` replaces the HTTP client's (the controller names its Lease identity).
    """
    where = f"context {context}" if context else (kubeconfig or "kubeconfig")
    if service_account:
        where = f"in-cluster ({service_account})"
        kubeconfig = _NO_KUBECONFIG  # kr8s falls back to the service account when no kubeconfig loads
    auth = None
    try:
        with anyio.fail_after(timeout):  # an exec plugin (a cloud's token command) may hang
            auth = await KubeAuth(kubeconfig=kubeconfig, context=context, serviceaccount=service_account)
        client = Client(
            auth=auth,
            context=str(auth.active_context or context or ""),
            timeout=timeout,
            retry=retry or retries.RetryPolicy(),
            user_agent=user_agent,
        )
        await client._session()  # reads the certificate, key and CA files
    except TimeoutError as exc:
        raise errors.KubeError(
            f"reading the credentials did not finish within {timeout:g}s",
            where=where,
            hint="check the kubeconfig's exec plugin (run its command by hand), or raise --timeout",
        ) from exc
    except (ValueError, KeyError, TypeError, OSError, RuntimeError) as exc:  # Runtime: an exec plugin failed
        raise errors.KubeError(
            f"cannot use the kubeconfig: {exc}{_tls_files(auth, exc)}",
            where=where,
            hint="pass --kubeconfig FILE or set KUBECONFIG, and a --context that exists in it",
        ) from exc
    unreachable = "check the server address in the kubeconfig and that the cluster is running"
    try:
        with anyio.fail_after(timeout):
            session = await client._session()
            response = await session.get("/version", headers=client._agent())
        if response.is_error:
            raise _error(response, where=where)
    except TimeoutError as exc:
        await client.close()
        raise errors.Unreachable(
            f"the API server did not answer within {timeout:g}s", where=where, hint=unreachable
        ) from exc
    except (httpx.TransportError, OSError) as exc:
        await client.close()
        raise errors.Unreachable(f"cannot reach the API server: {exc}", where=where, hint=unreachable) from exc
    except BaseException:
        with anyio.CancelScope(shield=True):
            await client.close()
        raise
    return client


__all__ = [
    "APPLY_PATCH",
    "IMPERSONATE_USER",
    "PAGE_SIZE",
    "RETRYING",
    "SERVICE_ACCOUNT_DIR",
    "USER_AGENT",
    "WRITE_VERBS",
    "Client",
    "ListResult",
    "RequestCounts",
    "connect",
    "decoded",
    "in_cluster",
]
