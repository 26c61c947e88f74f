"""The pipeline every command and the controller share: checkout → validate → resolve → plan.

A revision that fails validation is never rendered, diffed or applied (docs/architecture.md):
``load_plan`` raises a FleetError listing the findings. The revision id is the commit
the checkout is at (``git rev-parse HEAD``, ``-dirty`` when the work tree has
changes); outside git it is a hash of the files' content, so it still changes
exactly when the content does.

``plan_and_connect`` connects with the given context, else the Cluster's
``spec.context``, else the kubeconfig's current context, and lists the live objects
while the repository is parsed and validated in a worker thread (loading is CPU
work: it must never run on the event loop). Errors come out as themselves, never
wrapped in the task group's ExceptionGroup, the invalid revision before the
unreachable cluster.
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio

from fleet import kube
from fleet.engine import listings, plans
from fleet.errors import FleetError, user_errors
from fleet.manifests import kinds, load_revision, read_tree
from fleet.manifests.limits import Limits
from fleet.manifests.views import resolve
from fleet.policy import check
from fleet.telemetry import tracing


def tune_gc() -> None:
    """Collect the young generation only: a run builds tens of thousands of long-lived dicts
    (manifests, desired and live objects) that the cyclic collector would otherwise re-scan
    again and again for nothing (measured: about a fifth of the wall time of a 2,000-object diff)."""
    gc.set_threshold(50_000, 50, 1000)


def revision_id(repo: Path, *, files: dict[str, bytes]) -> str:
    """The commit SHA of ``repo`` (``-dirty`` if modified), or ``content-<hash>`` of ``files`` outside git."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "."],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        return f"{sha}-dirty" if dirty else sha
    except (OSError, subprocess.SubprocessError):
        digest = hashlib.sha256()
        for name in sorted(files):
            digest.update(name.encode() + b"\0" + files[name] + b"\0")
        return f"content-{digest.hexdigest()[:12]}"


def load_plan(repo: Path, *, cluster: str) -> plans.Plan:
    """Validate ``repo`` for ``cluster`` and plan it; FleetError listing the findings if invalid."""
    if not repo.is_dir():
        raise FleetError(f"{repo} is not a directory", hint="pass the path of a fleet repository checkout")
    tracer = tracing.tracer()
    with tracer.start_as_current_span("validate", attributes={tracing.CLUSTER: cluster}) as span:
        files, problems = read_tree(repo, limits=Limits())
        revision = load_revision(files, findings=tuple(problems))
        findings = [f for f in check(revision, clusters=[cluster]) if f.severity == "error"]
        span.set_attribute("fleet.findings", len(findings))
    if findings:
        shown = "\n  ".join(f"{f.location} {f.rule} {f.message}" for f in findings[:10])
        more = f"\n  ... and {len(findings) - 10} more" if len(findings) > 10 else ""
        raise FleetError(
            f"the revision does not validate; nothing was done:\n  {shown}{more}",
            where=str(repo),
            hint=f"run fleetctl validate {repo} --cluster {cluster}",
        )
    view = resolve(revision, cluster=cluster)
    sha = revision_id(repo, files=files)
    with tracer.start_as_current_span("render", attributes={tracing.CLUSTER: cluster, tracing.REVISION: sha}):
        return plans.plan(view, revision=sha)


OVERLAP_MAX_FILES = 5_000
"""Above this many YAML files, list live objects after planning, not during it: the
loader's peak memory and the listed objects would otherwise add up (measured at 10,000
objects: 337 MiB overlapped; the overlap saves well under a second)."""


async def plan_and_connect(
    repo: Path,
    *,
    cluster: str,
    context: str | None = None,
    kubeconfig: str | None = None,
    request_timeout: float = 30.0,
) -> tuple[plans.Plan, kube.Client, listings.Prefetched]:
    """Validate and plan ``repo`` (in a thread) while connecting and listing live objects.

    An invalid revision is reported as such even when the cluster cannot be reached:
    the repository is the first thing to fix, and CI shows it without a cluster.
    """
    context = context or cluster_context(repo, cluster=cluster)
    overlap = sum(1 for _ in itertools.islice(_yaml_files(repo), OVERLAP_MAX_FILES + 1)) <= OVERLAP_MAX_FILES
    clients: list[kube.Client] = []
    listing: list[listings.Prefetched] = []

    async def connect() -> None:
        clients.append(await kube.connect(kubeconfig=kubeconfig, context=context, timeout=request_timeout))
        if overlap:
            listing.append(await listings.prefetch(client=clients[0]))

    try:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(connect)
                plan = await anyio.to_thread.run_sync(lambda: load_plan(repo, cluster=cluster))
        except BaseExceptionGroup as group:
            found = user_errors(group)
            if not found or len(found) != len(group.exceptions):
                raise
            # The invalid revision first, then the cluster's error.
            error = sorted(found, key=lambda e: isinstance(e, kube.KubeError))[0]
            raise error from error.__cause__
        await anyio.lowlevel.checkpoint_if_cancelled()  # interrupted while loading: connect never finished
        if not listing:
            listing.append(await listings.prefetch(client=clients[0]))
    except BaseException:
        with anyio.CancelScope(shield=True):
            for client in clients:
                await client.close()
        raise
    return plan, clients[0], listing[0]


def _yaml_files(repo: Path) -> Iterator[str]:
    for _, _, names in os.walk(repo):
        yield from (n for n in names if n.endswith((".yaml", ".yml")))


def cluster_context(repo: Path, *, cluster: str) -> str | None:
    """``spec.context`` of ``clusters/<cluster>.yaml``: the context to use when --context is not given."""
    rel = f"clusters/{cluster}.yaml"
    try:
        content = (repo / rel).read_bytes()
    except OSError:
        return None
    for manifest in load_revision({rel: content}).manifests:
        if isinstance(manifest.model, kinds.Cluster) and manifest.name == cluster:
            return manifest.model.spec.context
    return None


__all__ = ["OVERLAP_MAX_FILES", "cluster_context", "load_plan", "plan_and_connect", "revision_id", "tune_gc"]
