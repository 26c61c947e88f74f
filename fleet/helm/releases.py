"""Helm releases through the real ``helm`` binary, run as anyio subprocesses.

fleet drives Helm rather than re-implementing it: chart rendering, hooks, the
release record (Secrets in the release namespace) and the release history that
``helm rollback`` uses all stay Helm's. Every call has a timeout and runs as a
subprocess, so the event loop never waits on it; helm's own ``Error:`` line
becomes a ``HelmError``.

Charts come from an HTTPS repository (``--repo URL``, no ``helm repo add`` and
so no shared repository list), an OCI registry (``oci://...``) or a local path
(a chart directory or ``.tgz``): ``ChartRef`` holds one of them.

Helm keeps caches and config under ``Settings.home`` (``HELM_*_HOME``), not in
the user's own Helm set-up. Releases fleet installs carry the Helm storage label
``app.kubernetes.io/managed-by=fleet``: fleet only ever uninstalls those.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import yaml

from fleet.helm.errors import FORBIDDEN_HINT, HelmError, HelmMissing, HelmTimeout, forbidden
from fleet.telemetry import tracing

MANAGED_LABEL = "app.kubernetes.io/managed-by=fleet"
COMMAND = "fleet.helm.command"
"""The ``run helm`` span's attribute: helm's subcommand (``upgrade``, ``status``, ``template``...)."""


@dataclass(frozen=True)
class Settings:
    binary: Path
    kubeconfig: str | None = None
    context: str | None = None
    home: Path | None = None
    """Where helm keeps its cache/config/data (default: a ``helm`` folder beside fleet's cache)."""
    timeout: float = 300.0
    """Seconds one helm call may take before fleet stops the process."""

    @property
    def operation_timeout(self) -> int:
        """helm's own ``--timeout`` for a release-changing call: shorter than ``timeout``, so helm
        itself gives up on a hook or resource and records the revision as failed before fleet
        would kill it (a killed helm leaves the release ``pending-*``, locked for every later call)."""
        return max(1, int(self.timeout - max(10.0, self.timeout * 0.1)))


@dataclass(frozen=True)
class ChartRef:
    """Where a chart comes from: an HTTPS repository, an OCI reference or a local path."""

    repository: str
    name: str
    version: str

    @property
    def kind(self) -> str:
        if self.repository.startswith("oci://"):
            return "oci"
        if self.repository.startswith(("https://", "http://")):
            return "repo"
        return "path"

    def args(self) -> list[str]:
        """The chart arguments of ``helm install|upgrade|template|show``."""
        if self.kind == "oci":
            return [f"{self.repository.rstrip('/')}/{self.name}", "--version", self.version]
        if self.kind == "repo":
            return [self.name, "--repo", self.repository, "--version", self.version]
        return [self.repository]

    def __str__(self) -> str:
        return f"{self.repository} {self.name}@{self.version}"


@dataclass(frozen=True)
class Release:
    """One installed release as ``helm list`` sees it."""

    name: str
    namespace: str
    revision: int
    status: str
    chart: str
    """``<chart name>-<version>``, e.g. ``gpu-operator-v26.7.0``."""
    app_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    def chart_version(self, chart_name: str) -> str:
        prefix = f"{chart_name}-"
        return self.chart[len(prefix) :] if self.chart.startswith(prefix) else self.chart

    @property
    def chart_name(self) -> str:
        """The chart name without its version (versions start at the last ``-`` followed by a digit or v)."""
        parts = self.chart.split("-")
        for i in range(len(parts) - 1, 0, -1):
            if parts[i][:1].isdigit() or (parts[i][:1] == "v" and parts[i][1:2].isdigit()):
                return "-".join(parts[:i])
        return self.chart


class Helm:
    """The helm binary for one cluster (kubeconfig + context)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.writes = 0
        """helm calls that change a release (install, upgrade, rollback, uninstall)."""

    # -- reads ------------------------------------------------------------------------------

    async def version(self) -> str:
        return (await self._run(["version", "--short"], cluster=False)).strip()

    async def releases(self, *, namespace: str | None = None) -> list[Release]:
        """Every release (all namespaces when ``namespace`` is None), failed and pending ones too."""
        argv = ["list", "-o", "json", "-a"]
        argv += ["-n", namespace] if namespace else ["-A"]
        items = json.loads(await self._run(argv) or "[]")
        return [
            Release(
                name=i["name"],
                namespace=i["namespace"],
                revision=int(i["revision"]),
                status=i["status"],
                chart=i["chart"],
                app_version=i.get("app_version", ""),
            )
            for i in items
        ]

    async def release(self, *, name: str, namespace: str) -> Release | None:
        for r in await self.releases(namespace=namespace):
            if r.name == name:
                labels = await self.labels(name=name, namespace=namespace, revision=r.revision)
                return Release(**{**r.__dict__, "labels": labels})
        return None

    async def labels(self, *, name: str, namespace: str, revision: int) -> dict[str, str]:
        """The storage labels of a release revision (read from its Secret by ``helm list --selector``)."""
        key, _, value = MANAGED_LABEL.partition("=")
        argv = ["list", "-o", "json", "-a", "-n", namespace, "--selector", MANAGED_LABEL, "--filter", f"^{name}$"]
        items = json.loads(await self._run(argv) or "[]")
        return {key: value} if any(int(i["revision"]) == revision for i in items) else {}

    async def values(self, *, name: str, namespace: str) -> dict[str, Any]:
        """The values the user supplied to the release's current revision."""
        out = json.loads(await self._run(["get", "values", name, "-n", namespace, "-o", "json"]) or "null")
        return out or {}

    async def history(self, *, name: str, namespace: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(
            await self._run(["history", name, "-n", namespace, "-o", "json", "--max", "256"]) or "[]"
        )
        return items

    async def hooks(self, *, name: str, namespace: str, revision: int) -> list[dict[str, Any]]:
        """The hook objects of one revision (``helm get hooks``), as the chart rendered them."""
        argv = ["get", "hooks", name, "-n", namespace, "--revision", str(revision)]
        return [d for d in await _documents(await self._run(argv)) if d]

    async def manifest(self, *, name: str, namespace: str) -> list[dict[str, Any]]:
        return await _documents(await self._run(["get", "manifest", name, "-n", namespace]))

    async def crds(self, chart: ChartRef) -> list[dict[str, Any]]:
        """The CRDs in the chart's ``crds/`` folder (which ``helm upgrade`` never updates)."""
        return [d for d in await _documents(await self._run(["show", "crds", *chart.args()], cluster=False)) if d]

    async def show_values(self, chart: ChartRef) -> dict[str, Any]:
        docs = await _documents(await self._run(["show", "values", *chart.args()], cluster=False))
        return docs[0] if docs else {}

    async def template(
        self,
        chart: ChartRef,
        *,
        release: str,
        namespace: str,
        values: dict[str, Any],
        api_versions: tuple[str, ...] = (),
        kube_version: str | None = None,
        include_crds: bool = False,
    ) -> list[dict[str, Any]]:
        """The chart's objects rendered offline (``lookup`` sees nothing).

        ``.Capabilities`` are helm's defaults plus ``api_versions`` (``group/version`` and
        ``group/version/Kind``) at ``kube_version``: pass what the cluster serves, or what its
        Kubernetes version serves by default, so the chart's own validations see it.
        ``include_crds`` adds the ``crds/`` of the chart and of the subcharts these values
        enable (``helm show crds`` lists every subchart's, enabled or not).
        """
        argv = ["template", release, *chart.args(), "-n", namespace]
        if include_crds:
            argv.append("--include-crds")
        if api_versions:
            argv += ["--api-versions", ",".join(api_versions)]
        if kube_version:
            argv += ["--kube-version", kube_version]
        with _values_file(values) as path:
            out = await self._run([*argv, "-f", str(path)], cluster=False)
        return [d for d in await _documents(out) if d]

    async def render(
        self,
        chart: ChartRef,
        *,
        release: str,
        namespace: str,
        values: dict[str, Any],
        api_versions: tuple[str, ...] = (),
        kube_version: str | None = None,
    ) -> list[dict[str, Any]]:
        """The objects an upgrade would apply, rendered by a server-side dry run (``lookup`` sees the cluster).

        A dry run cannot map kinds whose CRDs are not installed yet (a first install):
        then the chart is rendered offline (``template``) with the cluster's ``api_versions``
        and ``kube_version`` instead.
        """
        argv = ["upgrade", release, *chart.args(), "-n", namespace, "--install", "--reset-values"]
        argv += ["--dry-run=server", "-o", "json"]
        try:
            with _values_file(values) as path:
                out = json.loads(await self._run([*argv, "-f", str(path)]) or "{}")
        except HelmError as err:
            if "no matches for kind" not in err.what and "resource mapping not found" not in err.what:
                raise
            return await self.template(
                chart,
                release=release,
                namespace=namespace,
                values=values,
                api_versions=api_versions,
                kube_version=kube_version,
            )
        return [d for d in await _documents(out.get("manifest") or "") if d]

    # -- writes -----------------------------------------------------------------------------

    async def upgrade(
        self,
        chart: ChartRef,
        *,
        release: str,
        namespace: str,
        values: dict[str, Any],
        install: bool = True,
        wait_timeout: float | None = None,
    ) -> Release:
        """``helm upgrade --install`` with exactly ``values`` (``--reset-values``), labelled as fleet's."""
        argv = ["upgrade", release, *chart.args(), "-n", namespace, "--reset-values"]
        argv += ["--labels", MANAGED_LABEL]
        if install:
            argv += ["--install", "--create-namespace"]
        if wait_timeout is not None:
            argv += ["--wait"]
        limit = (
            min(int(wait_timeout), self.settings.operation_timeout) if wait_timeout else self.settings.operation_timeout
        )
        argv += ["--timeout", f"{limit}s"]
        with _values_file(values) as path:
            self.writes += 1
            await self._run([*argv, "-f", str(path)])
        found = await self.release(name=release, namespace=namespace)
        if found is None:
            raise HelmError(f"release {release} is missing right after helm upgrade", where=f"namespace {namespace}")
        return found

    async def rollback(self, *, name: str, namespace: str, revision: int | None = None) -> None:
        """Back to ``revision`` (default: the previous one) from Helm's own history."""
        self.writes += 1
        argv = ["rollback", name, *([str(revision)] if revision else []), "-n", namespace]
        await self._run([*argv, "--timeout", f"{self.settings.operation_timeout}s"])

    async def uninstall(self, *, name: str, namespace: str) -> None:
        """``helm uninstall`` with its hooks (the operator's pre-delete clean-up runs)."""
        self.writes += 1
        timeout = f"{self.settings.operation_timeout}s"
        await self._run(["uninstall", name, "-n", namespace, "--wait", "--timeout", timeout])

    # -- the subprocess ---------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        cache = Path(os.environ.get("FLEET_CACHE_DIR") or Path.home() / ".cache" / "fleet")
        home = self.settings.home or cache / "helm"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
        env |= {
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        if self.settings.kubeconfig:
            env["KUBECONFIG"] = self.settings.kubeconfig
        return env

    async def _run(self, argv: list[str], *, cluster: bool = True) -> str:
        if not self.settings.binary.exists():
            raise HelmMissing(
                f"no helm binary at {self.settings.binary}",
                hint="install helm 3 on PATH, set FLEET_HELM, or run `fleetctl sandbox build`",
            )
        full = [str(self.settings.binary), *argv]
        if cluster and self.settings.context:
            full += ["--kube-context", self.settings.context]
        # One span per process: the command only (the arguments hold paths and repository URLs).
        with tracing.tracer().start_as_current_span("run helm", attributes={COMMAND: argv[0]}) as span:
            try:
                with anyio.fail_after(self.settings.timeout):
                    done = await anyio.run_process(full, env=self._env(), check=False)
            except TimeoutError as err:
                raise HelmTimeout(
                    f"helm {argv[0]} did not finish within {self.settings.timeout:g}s",
                    where=" ".join(argv[:3]),
                    hint="check the cluster and the chart repository can be reached, or raise the helm timeout",
                ) from err
            span.set_attribute("process.exit.code", done.returncode)
            stdout = done.stdout.decode(errors="replace")
            if done.returncode != 0:
                stderr = done.stderr.decode(errors="replace").strip()
                what = _error_text(stderr) or f"helm exited {done.returncode}"
                failed = HelmError(f"helm {argv[0]} failed: {what}", where=" ".join(argv[:2]), stderr=stderr)
                if forbidden(failed):
                    failed.hint = FORBIDDEN_HINT
                raise failed
            return stdout


def _error_text(stderr: str) -> str:
    """helm's ``Error:`` line, with the indented lines that continue it (``1 error occurred:\n\t* ...``)."""
    lines = stderr.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Error:")), None)
    if start is None:
        return lines[-1].strip() if lines else ""
    out = [lines[start].removeprefix("Error: ").strip()]
    for ln in lines[start + 1 : start + 6]:
        # indented, bulleted, or a values-schema report (``node-feature-discovery:`` then ``- at '/gc': ...``)
        if not ln.strip() or not (ln.startswith(("\t", " ", "*", "- ")) or ln.rstrip().endswith(":")):
            break
        out.append(ln.strip())
    return " ".join(out)


class _values_file:
    """Values as a JSON file (YAML is a superset), removed afterwards."""

    def __init__(self, values: dict[str, Any]) -> None:
        fd, name = tempfile.mkstemp(prefix="fleet-values-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(values, fh)
        self.path = Path(name)

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        self.path.unlink(missing_ok=True)


async def _documents(text: str) -> list[dict[str, Any]]:
    """The mappings of a multi-document YAML stream helm printed.

    A rendered chart is large (the GPU Operator's CRDs alone are hundreds of KiB): it is
    parsed with libyaml in a worker thread, so the event loop that renews the controller's
    Lease never waits on it.
    """
    return await anyio.to_thread.run_sync(_parse_documents, text)


def _parse_documents(text: str) -> list[dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [d for d in yaml.load_all(text, Loader=loader) if isinstance(d, dict)]


__all__ = ["COMMAND", "MANAGED_LABEL", "ChartRef", "Helm", "Release", "Settings"]
