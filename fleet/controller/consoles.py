"""The console in the controller: the app under ``/ui``, drawn from the controller's own watch cache.

Off unless ``--console`` names an authentication mode (``settings.Settings.console``). With it, the
watch cache also keeps pods waiting to be scheduled and Events (``KINDS``), so a page view sends
no request to the API server: what each viewer may see is decided by access reviews for their
user and groups (``fleet.console.access``), remembered a minute.

- ``oidc``: log in with the provider at ``--console-oidc-issuer`` (discovered at the first
  log-in); bearer tokens are accepted too (TokenReview).
- ``token``: bearer tokens only, for API clients and proxies.
- ``anonymous``: every viewer is ``--console-anonymous-user``, with that identity's RBAC.

The Revision page (``/ui/revisions``) lists the commits of the followed ref that the git source
has fetched and shows what each would change on this cluster, diffed with the controller's own
client and settings (``revisions``; ``fleet.console.revisions.FetchedRevisions``). Its viewers
need ``get`` on the cluster's FleetSync, as for the Cluster page (``fleet.console.apps``).

fleet's ServiceAccount needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews`` and
``list``/``watch`` on pods and events (overlays/console).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from starlette.applications import Starlette

from fleet import kube
from fleet.console import apps, logins, oidc, sources, tokens
from fleet.console.access import Access
from fleet.console.apps import Console
from fleet.console.revisions import FetchedRevisions
from fleet.controller import controllers, heaps, settings
from fleet.kube import Kind
from fleet.kube.kinds import builtin
from fleet.source.sources import TARGET, GitSource
from fleet.views import revisions as views_revisions

KINDS: Mapping[sources.KindKey, str] = {sources.PODS: "status.phase=Pending", sources.EVENTS: ""}
"""What the console adds to the watch cache, with field selectors: pending pods, and Events."""


def extra_kinds(config: settings.Settings) -> dict[Kind, str]:
    """The kinds the watch cache keeps for the console ({} when it is off)."""
    if config.console == "off":
        return {}
    table = builtin()
    return {table[key]: selector for key, selector in KINDS.items()}


def source(ctl: controllers.Controller, *, cluster: str) -> sources.CacheSource:
    """The controller's cluster as the console reads it: the watch cache and the last FleetSync written."""
    cache = ctl.cache

    def objects(key: sources.KindKey) -> Sequence[Mapping[str, Any]] | None:
        store = cache.objects.get(key)
        return None if store is None else list(store.values())

    def version() -> int:
        current = ctl.writer.current or {}
        return hash((cache.events, str((current.get("metadata") or {}).get("resourceVersion"))))

    return sources.CacheSource(
        cluster=cluster,
        objects=objects,
        fleetsync=lambda: ctl.writer.current,
        version=version,
        kind_version=lambda key: cache.kind_events.get(key, 0),
    )


def login(config: settings.Settings, *, http: httpx.AsyncClient) -> logins.Login:
    if config.console == "oidc":
        assert config.console_oidc_client_secret_file is not None
        provider = oidc.Provider(
            issuer=config.console_oidc_issuer,
            client_id=config.console_oidc_client_id,
            client_secret=config.console_oidc_client_secret_file.read_text().strip(),
            redirect_uri=f"{config.console_url.rstrip('/')}/login/callback",
            user_prefix=config.console_oidc_user_prefix,
            group_prefix=config.console_oidc_group_prefix,
        )

        async def discover() -> oidc.RelyingParty:
            return await oidc.discover(provider, http=http)

        return logins.OidcLogin(discover)
    if config.console == "anonymous":
        return logins.AnonymousLogin(user=config.console_anonymous_user)
    return logins.TokenOnly()


def revisions(ctl: controllers.Controller, *, client: kube.Client) -> FetchedRevisions | None:
    """The Revision page's commits: what ``ctl``'s git source fetched, diffed as this controller would apply them."""
    if not isinstance(ctl.source, GitSource):
        return None
    made = views_revisions.Settings(client=client, options=lambda _: settings.standing_options(ctl.options))
    return FetchedRevisions(ctl.source.repository, ref=TARGET, path=ctl.source.path, settings=lambda _: made)


def build(
    config: settings.Settings, *, client: kube.Client, ctl: controllers.Controller, http: httpx.AsyncClient
) -> tuple[Starlette, Console]:
    """The console's app for this controller (``config.console`` is not ``off``)."""
    secret = (
        config.console_session_secret_file.read_text().strip()
        if config.console_session_secret_file
        else secrets.token_urlsafe(32)
    )
    reviews = tokens.Reviews(client)
    return apps.build(
        source=source(ctl, cluster=config.cluster),
        login=login(config, http=http),
        bearer=logins.Bearer(reviews.review) if config.console in ("oidc", "token") else None,
        access=Access(client),
        secret=secret,
        secure=config.console_url.startswith("https://"),
        jaeger=config.console_jaeger_url,
        revisions=revisions(ctl, client=client),
        after_picture=heaps.trim,
    )


__all__ = ["KINDS", "build", "extra_kinds", "login", "revisions", "source"]
