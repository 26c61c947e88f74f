"""The sandbox's binaries: built once per version from published Go modules, cached outside the tree.

Kubernetes publishes no server binaries to any registry this project can reach,
so the control plane is built from its Go modules: ``tools/ktestenv`` holds five
tiny ``main`` packages (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager, kubectl) over one dependency graph, version-stamped so
``/version`` reports the real release. KWOK and Helm are ``go install``-ed at
pinned versions, and KWOK's own default Stages are printed by
``tools/kwokstages`` at the same version (KWOK >= 0.8 has no built-in stages).
Gitea (the sandbox's git forge, ``fleet.sandbox.forges``) is built from its Go
module ``code.gitea.io/gitea`` inside a writable copy of that module: its
``go.mod`` has replace directives, which apply only to the main module. The copy
stays in the cache beside the binary, as Gitea's ``STATIC_ROOT_PATH`` (a build
without the ``bindata`` tag reads its templates and locales from there).

The control plane is built for one selectable Kubernetes release at a time
(``fleet.sandbox.releases``: the default, or ``FLEET_KUBERNETES``), with ``go build
-modfile=`` the module file that pins that release's graph; every release has its own
cache folder, so switching between them rebuilds nothing.

Everything lands in ``$FLEET_CACHE_DIR`` (default ``~/.cache/fleet``) under a
directory named after the versions and a hash of the Go module files used, with a
``.complete`` marker written last: a build interrupted half way is redone, an
unchanged version is never rebuilt. ``FLEET_KUBE_BIN`` points at a directory of
official release binaries to use instead of building them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fleet.sandbox import releases, versions
from fleet.sandbox.errors import BuildError

CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubectl")
ALL = (*CONTROL_PLANE, "kwok", "helm")
_TOOLS = Path(__file__).resolve().parents[2] / "tools"

Progress = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Binaries:
    """Where each binary and the KWOK stage file are."""

    paths: dict[str, Path]
    kwok_stages: Path

    def __getitem__(self, name: str) -> Path:
        return self.paths[name]


def cache_root() -> Path:
    return Path(os.environ.get("FLEET_CACHE_DIR") or Path.home() / ".cache" / "fleet")


def _module_hash(directory: Path, modfile: str = "go.mod") -> str:
    h = hashlib.sha256()
    for f in (directory / modfile, (directory / modfile).with_suffix(".sum")):
        if f.exists():
            h.update(f.read_bytes())
    return h.hexdigest()[:10]


def kube_dir(release: releases.Release) -> Path:
    """Where ``release``'s control plane is (or will be) built."""
    return cache_root() / f"kube-{release.version}-{_module_hash(_TOOLS / 'ktestenv', release.modfile)}"


def _tools_dir() -> Path:
    tag = f"kwok-{versions.KWOK}-helm-{versions.HELM}-{_module_hash(_TOOLS / 'kwokstages')}"
    return cache_root() / tag


@dataclass(frozen=True)
class Gitea:
    """The built Gitea: its binary and the module copy it reads templates and locales from."""

    binary: Path
    static_root: Path


def gitea_dir() -> Path:
    return cache_root() / f"gitea-{versions.GITEA}"


def locate_gitea() -> Gitea | None:
    """Gitea if it is built for the pinned version, else None."""
    root = gitea_dir()
    if not (root / ".complete").exists():
        return None
    return Gitea(binary=root / "bin" / "gitea", static_root=root / "src")


def _official() -> dict[str, Path]:
    root = os.environ.get("FLEET_KUBE_BIN")
    if not root:
        return {}
    return {n: Path(root) / n for n in ALL if (Path(root) / n).is_file() and os.access(Path(root) / n, os.X_OK)}


def locate(release: releases.Release | None = None) -> Binaries | None:
    """The binaries of ``release`` (default: ``releases.select()``) if all are built (or provided by
    FLEET_KUBE_BIN), else None."""
    official = _official()
    kube, tools = kube_dir(release or releases.select()), _tools_dir()
    paths: dict[str, Path] = {}
    for name in ALL:
        if name in official:
            paths[name] = official[name]
            continue
        base = tools if name in ("kwok", "helm") else kube
        if not (base / ".complete").exists():
            return None
        paths[name] = base / "bin" / name
    stages = tools / "kwok-stages.yaml"
    if not stages.exists():
        return None
    return Binaries(paths=paths, kwok_stages=stages)


def _run(
    step: str, argv: list[str], *, cwd: Path, env: dict[str, str], progress: Progress, stdout_to: Path | None = None
) -> float:
    """Run one build step, reporting that it is still running every 30 s, and return its duration."""
    progress(f"==> {step}")
    started = time.monotonic()
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(30):
            progress(f"    ... {step}: {time.monotonic() - started:.0f} s")

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        out = stdout_to.open("w") if stdout_to else subprocess.PIPE
        try:
            proc = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.PIPE, text=True, check=False)
        finally:
            if stdout_to and not isinstance(out, int):
                out.close()
    except FileNotFoundError as exc:
        raise BuildError(
            f"{argv[0]} not found", where=step, hint="install Go 1.26 (https://go.dev/dl) and put `go` on PATH"
        ) from exc
    finally:
        done.set()
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-25:])
        raise BuildError(
            f"{step} failed (exit {proc.returncode}):\n{tail}",
            where=str(cwd),
            hint="check Go 1.26 and access to the Go module proxy (GOPROXY)",
        )
    progress(f"    {step}: done in {elapsed:.1f} s")
    return elapsed


def _go_env(gobin: Path | None = None) -> dict[str, str]:
    # Reproducible from go.sum alone; no VCS stamping (the build must not depend on .git).
    flags = " ".join(f for f in (os.environ.get("GOFLAGS", ""), "-mod=readonly", "-buildvcs=false") if f)
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS=flags)
    if gobin is not None:
        env["GOBIN"] = str(gobin)
    return env


def build(
    *, release: releases.Release | None = None, progress: Progress = _stderr, force: bool = False
) -> tuple[Binaries, dict[str, float]]:
    """Build whatever every sandbox needs (the control plane of ``release``, default
    ``releases.select()``, KWOK, Helm) and is missing for the pinned versions; return the
    binaries and step timings. Gitea is ``build_gitea``.

    Builders on one machine (two test runs, a test run and ``./dev demo``, ``./dev test``'s
    background build of Gitea and Jaeger and a test that needs them) take turns on an
    exclusive lock of the cache: each stages into the same ``.partial`` folders, and a
    second builder arriving while the first works waits for it, then finds its result.
    """
    release = release or releases.select()
    found = None if force else locate(release)
    if found is not None:
        return found, {}
    with _build_lock(progress):
        return _build(release=release, progress=progress, force=force)


def build_gitea(*, progress: Progress = _stderr, force: bool = False) -> tuple[Gitea, dict[str, float]]:
    """Gitea for the pinned version, built if it is not in the cache yet (or ``force``); its step's timing."""
    found = None if force else locate_gitea()
    if found is not None:
        return found, {}
    timings: dict[str, float] = {}
    with _build_lock(progress):
        if force or locate_gitea() is None:
            timings["gitea"] = _build_gitea(progress=progress)
    built = locate_gitea()
    assert built is not None  # _build_gitea wrote the marker or raised
    return built, timings


def _build_gitea(*, progress: Progress) -> float:
    """Download the module, copy it somewhere writable, ``go build`` inside it; seconds taken."""
    root = gitea_dir()
    staging = root.with_name(root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "bin").mkdir(parents=True)
    module = f"code.gitea.io/gitea@{versions.GITEA}"
    listing = staging / "download.json"
    took = _run(
        f"go mod download {module}",
        ["go", "mod", "download", "-json", module],
        cwd=staging,
        env=_go_env(),
        progress=progress,
        stdout_to=listing,
    )
    source = Path(json.loads(listing.read_text())["Dir"])
    shutil.copytree(source, staging / "src")
    for path in [staging / "src", *(staging / "src").rglob("*")]:  # the module cache is read-only
        path.chmod(path.stat().st_mode | 0o200)
    version = versions.GITEA.removeprefix("v")
    ldflags = f'-s -w -X "main.Version={version}" -X "main.Tags={versions.GITEA_TAGS}"'
    took += _run(
        f"go build gitea {versions.GITEA} (-tags '{versions.GITEA_TAGS}')",
        ["nice", "-n", "10", "go", "build", "-trimpath", "-tags", versions.GITEA_TAGS, "-ldflags", ldflags,
         "-o", str(staging / "bin" / "gitea"), "."],
        cwd=staging / "src",
        env=_go_env(),
        progress=progress,
    )  # fmt: skip
    (staging / ".complete").write_text(versions.GITEA)
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return took


@contextlib.contextmanager
def _build_lock(progress: Progress) -> Iterator[None]:
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".build.lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"==> waiting for another build of the sandbox binaries in {root}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(*, release: releases.Release, progress: Progress, force: bool) -> tuple[Binaries, dict[str, float]]:
    found = None if force else locate(release)
    if found is not None:
        return found, {}
    official = _official()
    timings: dict[str, float] = {}
    kube = kube_dir(release)
    if not set(CONTROL_PLANE) <= set(official) and (force or not (kube / ".complete").exists()):
        ver = release.version
        major, minor = ver.removeprefix("v").split(".")[:2]
        ldflags = ["-s", "-w"]
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
            ldflags += [
                f"-X {pkg}.gitVersion={ver}",
                f"-X {pkg}.gitMajor={major}",
                f"-X {pkg}.gitMinor={minor}",
                f"-X {pkg}.gitTreeState=clean",
            ]
        staging = kube.with_name(kube.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "bin").mkdir(parents=True)
        timings["control-plane"] = _run(
            f"go build control plane {ver} (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl)",
            [
                "go",
                "build",
                f"-modfile={release.modfile}",
                "-trimpath",
                "-ldflags",
                " ".join(ldflags),
                "-o",
                str(staging / "bin") + "/",
                "./cmd/...",
            ],
            cwd=_TOOLS / "ktestenv",
            env=_go_env(),
            progress=progress,
        )
        (staging / ".complete").write_text(ver)
        shutil.rmtree(kube, ignore_errors=True)
        staging.rename(kube)
    tools = _tools_dir()
    if force or not (tools / ".complete").exists():
        staging = tools.with_name(tools.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        (staging / "bin").mkdir(parents=True)
        if "kwok" not in official:
            timings["kwok"] = _run(
                f"go install kwok {versions.KWOK}",
                ["go", "install", f"sigs.k8s.io/kwok/cmd/kwok@{versions.KWOK}"],
                cwd=_TOOLS,
                env=_go_env(staging / "bin"),
                progress=progress,
            )
        if "helm" not in official:
            timings["helm"] = _run(
                f"go install helm {versions.HELM}",
                [
                    "go",
                    "install",
                    "-ldflags",
                    f"-s -w -X helm.sh/helm/v3/internal/version.version={versions.HELM}",
                    f"helm.sh/helm/v3/cmd/helm@{versions.HELM}",
                ],
                cwd=_TOOLS,
                env=_go_env(staging / "bin"),
                progress=progress,
            )
        timings["kwok-stages"] = _run(
            "KWOK default stages",
            ["go", "run", "."],
            cwd=_TOOLS / "kwokstages",
            env=_go_env(),
            progress=progress,
            stdout_to=staging / "kwok-stages.yaml",
        )
        (staging / ".complete").write_text(versions.KWOK)
        shutil.rmtree(tools, ignore_errors=True)
        staging.rename(tools)
    found = locate(release)
    if found is None:
        raise BuildError(
            "binaries missing after the build",
            where=str(cache_root()),
            hint="remove the cache directory and run `fleetctl sandbox build` again",
        )
    return found, timings


__all__ = [
    "ALL",
    "CONTROL_PLANE",
    "Binaries",
    "Gitea",
    "build",
    "build_gitea",
    "cache_root",
    "gitea_dir",
    "kube_dir",
    "locate",
    "locate_gitea",
]
