"""Session-wide fixtures: the sandbox control plane, brought up once and shared by every test.

Tests that claim cluster behaviour use ``sandbox`` (a real etcd, kube-apiserver,
kube-scheduler, kube-controller-manager and KWOK with simulated GPU nodes) and
isolate themselves in their own ``namespace``. ``admin_client`` and
``restricted_client`` are fleet's own Kubernetes clients as admin and as alice. The sandbox starts in a temporary
directory and is stopped at the end of the session; set
``FLEET_TEST_SANDBOX_DIR`` to keep one running between local runs (it is reused
when healthy, never stopped by the tests).

``release_sandbox`` runs the DRA version tests (what a Kubernetes minor serves and keeps) on the
session's release and on each one ``FLEET_TEST_KUBERNETES_EXTRA`` names (``1.34``; ``./dev test``
sets the oldest): a sandbox of its own per extra release, its binaries built beside the suite.

The GPU Operator stage's fixtures live here too, for ``tests/operator`` and the controller
tests that run that stage: the real ``helm`` binary (``helm_settings``), NVIDIA's gpu-operator
chart on a loopback repository (``chart_repo``, with ``upstream`` the vendored tree it comes from
and the played operator renders from) and ``cleanup_release``, which uninstalls the cluster-wide
release after a test.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet import helm, kube
from fleet.sandbox import Sandbox, binaries, charts, clusters, credentials, jaegers, releases
from tests import paths

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

pytest_plugins = ("tests.browsers",)
"""The ``browser`` fixture (Debian's Chromium) for every test folder; see tests/browsers.py."""


EXTRAS = ("gitea", "jaeger", "image", "kubernetes")
"""What ``./dev test`` builds in the background while the suite runs, in its order (``kubernetes``:
the control plane of the releases in ``FLEET_TEST_KUBERNETES_EXTRA``)."""
EXTRA_RELEASES = "FLEET_TEST_KUBERNETES_EXTRA"


def releases_under_test() -> list[releases.Release]:
    """The session's release (``FLEET_KUBERNETES`` or the default), then those ``FLEET_TEST_KUBERNETES_EXTRA``
    names (comma-separated), each once."""
    found = [releases.select()]
    for name in os.environ.get(EXTRA_RELEASES, "").split(","):
        release = releases.select(name.strip(), where=EXTRA_RELEASES) if name.strip() else None
        if release is not None and release not in found:
            found.append(release)
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``extras("gitea"|"jaeger"|"image")`` run last, in the order those are built;
    the others start with the ``slow`` ones (minutes each), so no worker is left with one at the end.

    ``./dev test`` hands whole files to its workers (``--dist loadfile``), in this order: a file
    that mixed extras tests with others would be handed out early and its worker would wait for a
    build, so such a file is refused."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        marker = item.get_closest_marker("extras")
        if marker is not None:
            return EXTRAS.index(marker.args[0]), 0
        return -1, 0 if item.get_closest_marker("slow") else 1

    ranks: dict[Path, set[int]] = {}
    for item in items:
        ranks.setdefault(item.path, set()).add(rank(item)[0])
    mixed = sorted(str(path) for path, seen in ranks.items() if -1 in seen and len(seen) > 1)
    if mixed:
        raise pytest.UsageError(
            f"{', '.join(mixed)}: extras tests share a file with others; move them to a file of their own"
        )
    items.sort(key=rank)


@pytest.fixture(scope="session")
def binaries_cache() -> Path:
    """Where the sandbox's binaries are built, read before ``plan_cache_dir`` moves ``FLEET_CACHE_DIR``
    (else the session would build them again into a temporary directory that pytest later removes)."""
    return binaries.cache_root()


@pytest.fixture(scope="session", autouse=True)
def plan_cache_dir(tmp_path_factory: pytest.TempPathFactory, binaries_cache: Path) -> Iterator[Path]:
    """fleetctl's on-disk plan cache (``fleet.engine.plancaches``) in the session's temporary
    directory rather than the user's ``~/.cache``: tests leave nothing behind, and every repeated
    ``fleetctl diff``/``apply`` of unchanged content in the suite runs on a stored plan.

    ``FLEET_CACHE_DIR`` also holds the sandbox's built binaries (``fleet.sandbox.binaries``): the
    ones already built are linked in, so what looks them up in a test (``helm_binary``) finds them
    instead of linking them again with go build (about 75 s of both cores and 800 MB of disk)."""
    directory = tmp_path_factory.mktemp("cache")
    if binaries_cache.is_dir():
        for entry in binaries_cache.iterdir():
            if entry.is_dir() and entry.name != "plans" and (entry / ".complete").exists():
                (directory / entry.name).symlink_to(entry)
    # Gitea and Jaeger may still be building (``./dev test`` builds them in the background while
    # the suite runs): their folders and the build lock are linked before they exist, so a test
    # that needs one waits for that build on the lock, then finds its result, rather than
    # building it again in here.
    binaries_cache.mkdir(parents=True, exist_ok=True)
    (binaries_cache / ".build.lock").touch()
    kubes = [binaries.kube_dir(r).name for r in releases_under_test()]
    for name in (".build.lock", binaries.gitea_dir().name, jaegers.cache_dir().name, *kubes):
        link = directory / name
        if not link.is_symlink():
            link.symlink_to(binaries_cache / name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLEET_CACHE_DIR", str(directory))
        yield directory


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory, binaries_cache: Path) -> Iterator[Sandbox]:
    keep = os.environ.get("FLEET_TEST_SANDBOX_DIR")
    directory = Path(keep) if keep else tmp_path_factory.mktemp("sandbox")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLEET_CACHE_DIR", str(binaries_cache))
        sb = clusters.up(directory=directory)
    try:
        yield sb
    finally:
        if not keep:
            clusters.down(directory=directory)


@pytest.fixture(scope="session", params=releases_under_test(), ids=lambda release: release.name)
def release_sandbox(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, binaries_cache: Path
) -> Iterator[Sandbox]:
    """A sandbox of each tested release: the session's ``sandbox`` for its own release, else one of its
    own with the default profile (built first when the cache lacks it, waiting for ``./dev test``'s
    background build on its lock). Tests that use it are marked ``extras("kubernetes")``."""
    release: releases.Release = request.param
    if release == releases.select():
        yield request.getfixturevalue("sandbox")
        return
    directory = tmp_path_factory.mktemp(f"sandbox-{release.name}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLEET_CACHE_DIR", str(binaries_cache))
        sb = clusters.up(directory=directory, release=release)
    try:
        yield sb
    finally:
        clusters.down(directory=directory)


def kubectl_of(sandbox: Sandbox) -> Kubectl:
    """Run ``sandbox``'s real kubectl as admin (``context=`` for alice@/bob@fleet-sandbox)."""

    def run(
        *args: str, context: str | None = None, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return sandbox.kubectl(*args, context=context, stdin=stdin, check=check)

    return run


@pytest.fixture(scope="session")
def kubectl(sandbox: Sandbox) -> Kubectl:
    return kubectl_of(sandbox)


def gpu_pod(
    kubectl: Kubectl,
    namespace: str,
    *,
    name: str,
    claim: str = "",
    template: str = "",
    also: tuple[dict[str, Any], ...] = (),
    node: str = "",
    labels: dict[str, str] | None = None,
) -> None:
    """Start pod ``name`` holding the existing (or ``also``-created) ResourceClaim ``claim``, as the
    guide's pods do: one container using the claim, tolerating the GPU nodes' taint; on ``node``
    when given (the scheduler still allocates the claim: a ``nodeSelector``, not ``nodeName``); with
    ``template``, a claim the ResourceClaim controller makes from that ResourceClaimTemplate."""
    source = {"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, **({"labels": labels} if labels else {})},
        "spec": {
            "resourceClaims": [{"name": "gpu", **source}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }
    if node:
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    items = [*also, pod]
    kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


@pytest.fixture()
def namespace(kubectl: Kubectl) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards, waiting until it is gone: so the devices its
    pods held are free for the next test, and the namespace controller's deletions of what it held
    (roles, quotas, templates) land in this test, not in the write counts of a later one.

    Workloads, their pods and claims are force-deleted first: a namespace still holding pods waits
    for their graceful end (kube-controller-manager starts on a deleted namespace 5 s later, its
    fixed ``namespaceDeletionGracePeriod``, then again when the pods' grace estimate has passed)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        kubectl(
            "delete", "all,resourceclaims", "--all", "-n", name, "--grace-period=0", "--force", "--wait=true",
            "--timeout=120s", check=False,
        )  # fmt: skip
        kubectl("delete", "namespace", name, "--wait=true", "--timeout=120s", check=False)


# -- the GPU Operator stage: real helm and NVIDIA's chart (tests/operator, tests/controller) --

RELEASE = "gpu-operator"
NAMESPACE = "gpu-operator"


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    found = binaries.locate()
    if found is None:
        pytest.fail("the sandbox binaries are not built (run `fleetctl sandbox build`)")
    return found["helm"]


@pytest.fixture(scope="session")
def upstream() -> charts.Upstream:
    """NVIDIA/gpu-operator v26.7.0 as vendored in the checkout (the chart and the state manifests)."""
    return charts.Upstream(paths.GPU_OPERATOR).require()


@pytest.fixture(scope="session")
def chart_repo(tmp_path_factory: pytest.TempPathFactory, helm_binary: Path, upstream: charts.Upstream) -> Iterator[str]:
    """URL of a Helm repository on 127.0.0.1 serving NVIDIA's gpu-operator chart (v26.7.0, and the
    derived v26.7.1 and v27.1.0)."""
    with charts.serve(tmp_path_factory.mktemp("charts"), helm=helm_binary, upstream=upstream) as url:
        yield url


@pytest.fixture(scope="session")
def helm_settings(sandbox: Sandbox, helm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> helm.Settings:
    return helm_settings_of(sandbox, helm_binary, tmp_path_factory)


def helm_settings_of(sandbox: Sandbox, helm_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> helm.Settings:
    """The real helm against ``sandbox`` as admin, with a home of its own."""
    return helm.Settings(
        binary=helm_binary,
        kubeconfig=str(sandbox.kubeconfig),
        context=credentials.CLUSTER,
        home=tmp_path_factory.mktemp("helm-home"),
        timeout=120,
    )


@pytest.fixture()
def cleanup_release(kubectl: Kubectl, helm_settings: helm.Settings) -> Iterator[None]:
    """Uninstall the operator release and its leftovers after the test (cluster-wide objects)."""
    yield
    env_args = ["--kube-context", credentials.CLUSTER, "--kubeconfig", str(helm_settings.kubeconfig)]
    subprocess.run(
        [str(helm_settings.binary), "uninstall", RELEASE, "-n", NAMESPACE, "--wait", *env_args],
        capture_output=True,
        timeout=120,
        check=False,
    )
    kubectl("delete", "gpucluster", "--all", "--ignore-not-found", "--wait=false", check=False)
    kubectl("delete", "clusterpolicy", "--all", "--ignore-not-found", check=False)


@pytest.fixture()
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture()
async def admin_client(sandbox: Sandbox, anyio_backend: str) -> AsyncIterator[kube.Client]:
    """fleet's Kubernetes client as the sandbox admin (system:masters)."""
    client = await kube.connect(kubeconfig=str(sandbox.kubeconfig), context=credentials.CLUSTER)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture()
async def restricted_client(sandbox: Sandbox, anyio_backend: str) -> AsyncIterator[kube.Client]:
    """fleet's Kubernetes client as alice (groups ml-research, sandbox:users; no rights until bound)."""
    client = await kube.connect(kubeconfig=str(sandbox.kubeconfig), context=f"alice@{credentials.CLUSTER}")
    try:
        yield client
    finally:
        await client.close()
