"""``fleet-controller`` (and ``python -m fleet.controller``): settings in, one task group out.

Start-up is where a controller must be strict: invalid settings end the process
with exit 2 and one line per setting (``settings.SettingsError``), so do a state
directory it cannot write and a pod whose service account token or CA it cannot read
(``startups.StartError``); an unreachable API server or an unusable kubeconfig end it
with exit 1 and the usual what/where/hint — never a traceback. After that the process runs until SIGTERM/SIGINT:

- the HTTP server (``servers``: /webhook, /healthz, /readyz, /metrics),
- leader election (``leaders.elect``),
- the controller loop (``controllers.Controller``).

The cluster is reached with the in-cluster configuration when the process runs in a
pod (``KUBERNETES_SERVICE_HOST`` and a service account token), else like kubectl
(``--kubeconfig``/``$KUBECONFIG``, ``--context``). On SIGTERM the write in flight is
finished (the engine shields each object's request), the ledger already holds the
progress, leadership is released, and the process exits 0.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import httpx

from fleet import helm, hosts, kube
from fleet.controller import consoles, controllers, leaders, servers, settings, startups, statuses
from fleet.controller.metrics import Metrics
from fleet.engine import plancaches
from fleet.errors import FleetError
from fleet.source import Credentials, GitSource
from fleet.telemetry import tracing

logger = logging.getLogger("fleet.controller")


def main(argv: Sequence[str] | None = None) -> None:
    try:
        config = settings.parse(sys.argv[1:] if argv is None else argv)
        startups.check(config)
    except (settings.SettingsError, startups.StartError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(
        level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    if config.log_level != "debug":
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request (Lease renewals every 2 s)
    try:
        provider = tracing.setup()
    except FleetError as err:  # an OTEL_* setting fleet cannot honour
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(run, config)
    except FleetError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        pass
    finally:
        tracing.close(provider)  # the last reconcile's spans, within a few seconds of the grace period


async def connect(config: settings.Settings, *, user_agent: str = "") -> kube.Client:
    """In-cluster first (a pod), then the kubeconfig like kubectl.

    ``user_agent`` carries the replica's Lease identity, so the API server's audit log
    tells which replica sent each write (a deposed leader must have stopped writing).
    """
    account = str(config.service_account_dir)
    if config.kubeconfig is None and kube.in_cluster(service_account=account):
        return await kube.connect(service_account=account, user_agent=user_agent)
    return await kube.connect(kubeconfig=config.kubeconfig, context=config.context, user_agent=user_agent)


def build(config: settings.Settings, *, client: kube.Client, metrics: Metrics) -> controllers.Controller:
    credentials = Credentials(
        token_file=config.git_token_file,
        ssh_key_file=config.git_ssh_key_file,
        known_hosts_file=config.git_known_hosts_file,
        ca_file=config.git_ca_file,
    )
    source = GitSource(
        url=config.repo,
        ref=config.ref or None,
        path=config.path,
        cache_dir=config.state_dir / "git",
        credentials=credentials,
        timeout=config.git_timeout,
        max_bytes=config.git_max_bytes,
    )
    options = controllers.Options(
        cluster=config.cluster,
        interval=config.interval,
        resync=config.resync,
        health_timeout=config.health_timeout,
        drift_policy=config.drift_policy,
        force_conflicts=config.force_conflicts,
        team_impersonation=config.team_impersonation,
        helm=_helm(config),
        commit_status_target_url=config.commit_status_target_url,
        watching=controllers.Watching(extra=consoles.extra_kinds(config)),
    )
    store = plancaches.PlanCache(config.state_dir / "plans")
    ctl = controllers.Controller(
        client=client,
        source=source,
        options=options,
        metrics=metrics,
        store=store,
        poster=_poster(config, metrics),
        reader=_reader(config),
        spec=statuses.Spec(repository=source.where, ref=config.ref, path=config.path),
    )
    return ctl


def _poster(config: settings.Settings, metrics: Metrics) -> hosts.Poster | None:
    """The commit status poster (``--commit-status-token-file``); None when statuses are off.

    ``--git-ca-file`` verifies the host's API too: a self-hosted GitLab or Gitea behind a
    private CA serves git and its API with the same certificate."""
    where = config.commit_status_target
    if where is None or config.commit_status_token_file is None:
        return None
    logger.info("commit statuses go to %s %s (%s)", where.provider, where.repository, where.api_url)
    return hosts.Poster(
        target=where,
        token_file=config.commit_status_token_file,
        ca_file=config.git_ca_file,
        on_result=lambda result: metrics.git.commit_status_posts.labels(result=result).inc(),
    )


def _reader(config: settings.Settings) -> hosts.Reader | None:
    """The reader of the earlier rollout waves' commit statuses: the poster's host and token."""
    where = config.commit_status_target
    if where is None or config.commit_status_token_file is None:
        return None
    return hosts.Reader(target=where, token_file=config.commit_status_token_file, ca_file=config.git_ca_file)


def _helm(config: settings.Settings) -> helm.Settings | None:
    """helm for the operator stage, against the controller's own cluster (in-cluster when no kubeconfig)."""
    found = config.helm or (Path(p) if (p := shutil.which("helm")) else None)
    if found is None:
        return None
    home = config.state_dir / "helm"
    kubeconfig = config.kubeconfig
    account = config.service_account_dir
    if kubeconfig is None and kube.in_cluster(service_account=str(account)):
        kubeconfig = str(helm_kubeconfig(account=account, path=home / "in-cluster.kubeconfig"))
    return helm.Settings(
        binary=found, kubeconfig=kubeconfig, context=config.context, home=home, timeout=config.helm_timeout
    )


def helm_kubeconfig(*, account: Path, path: Path) -> Path:
    """A kubeconfig for helm with the controller's in-cluster identity: the service host and port,
    the service account's CA, and its token by file (``tokenFile``: client-go re-reads it, so a
    rotated projected token is used without a restart).

    helm finds the in-cluster configuration by itself only at the fixed pod path; this also works
    when ``FLEET_SERVICE_ACCOUNT_DIR`` points elsewhere, and names what helm runs as. Written
    once at start-up (a few hundred bytes), before the loop's work begins.
    """
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    namespace_file = account / "namespace"
    ns = {"namespace": namespace_file.read_text().strip()} if namespace_file.is_file() else {}
    ca = str(account / "ca.crt")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "in-cluster",
        "clusters": [{"name": "in-cluster", "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": "service-account", "user": {"tokenFile": str(account / "token")}}],
        "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "service-account", **ns}}],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=1) + "\n")
    path.chmod(0o600)
    return path


async def run(config: settings.Settings) -> None:
    identity = config.identity or f"{socket.gethostname()}_{os.getpid()}"
    client = await connect(config, user_agent=f"fleet-controller/{identity}")
    metrics = Metrics()
    http = httpx.AsyncClient(timeout=10.0)  # the console's OIDC provider (discovery, tokens, keys)
    try:
        ctl = build(config, client=client, metrics=metrics)
        secret = config.webhook_secret_file.read_bytes().strip() if config.webhook_secret_file else None
        console = None
        stop_console: Callable[[], None] | None = None
        if config.console != "off":
            console, state = consoles.build(config, client=client, ctl=ctl, http=http)
            stop_console = state.stop
        app = servers.build(
            metrics=metrics,
            ready=lambda: ctl.ready,
            on_push=lambda ref: ctl.poke(reason=f"push to {ref}"),
            secret=secret,
            ref=config.ref or None,
            console=console,
        )
        host, port = config.address
        async with anyio.create_task_group() as tg:
            bound = await tg.start(
                functools.partial(servers.serve, app=app, host=host, port=port, on_stop=stop_console)
            )
            served = "/webhook /healthz /readyz /metrics" + (f" /ui (console: {config.console})" if console else "")
            logger.info("serving %s on %s:%s", served, host, bound)
            tg.start_soon(
                functools.partial(
                    leaders.elect,
                    client=client,
                    cluster=config.cluster,
                    identity=identity,
                    enabled=config.leader_elect,
                    leader=ctl.leader,
                    timings=config.lease_timings,
                )
            )
            tg.start_soon(ctl.run)
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    logger.info("%s: finishing the write in flight, then stopping", signal.Signals(signum).name)
                    await ctl.stop()
                    tg.cancel_scope.cancel()
                    break
    finally:
        with anyio.CancelScope(shield=True):
            await http.aclose()
            await client.close()


__all__ = ["build", "connect", "main", "run"]
