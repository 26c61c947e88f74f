"""The Dockerfile ships what the controller runs: the pinned helm, git, a non-root user, a health check.

tests/install/test_image.py builds the image and runs it; what can drift silently is checked
here against the code it must agree with, without building: helm's version and build
command are the sandbox's (``fleet.sandbox.versions``, ``fleet.sandbox.binaries``), so the
GPU Operator stage runs the helm the tests ran.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from fleet.sandbox import versions

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
BINARIES = (ROOT / "fleet" / "sandbox" / "binaries.py").read_text()


def stage(name: str) -> str:
    """The text of one build stage (``FROM ... AS name`` up to the next ``FROM``)."""
    found = re.search(rf"^FROM \S+ AS {name}\n(.*?)(?=^FROM |\Z)", DOCKERFILE, flags=re.M | re.S)
    assert found, f"no stage {name!r} in the Dockerfile"
    return found.group(1)


def test_helm_is_built_at_the_sandbox_version() -> None:
    helm = stage("helm")
    assert f"ARG HELM_VERSION={versions.HELM}\n" in helm
    assert '"helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"' in helm
    # the same version stamp as the sandbox's build, so `helm version` answers the same
    assert "helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" in helm
    assert "helm.sh/helm/v3/internal/version.version={versions.HELM}" in BINARIES


def test_the_go_image_matches_the_go_the_sandbox_builds_with() -> None:
    image = re.search(r"^FROM golang:(\d+\.\d+)\S* AS helm$", DOCKERFILE, flags=re.M)
    assert image, "the helm stage builds on an official golang image"
    assert versions.GO_DIRECTIVE.startswith(image.group(1) + ".")


def test_the_runtime_image_has_helm_and_git_on_path_and_runs_unprivileged() -> None:
    runtime = DOCKERFILE.rsplit("\nFROM ", 1)[1]
    assert "COPY --from=helm /out/helm /usr/local/bin/helm" in runtime
    assert re.search(r"apt-get install .*\bgit\b", runtime)
    assert re.search(r"^USER 65532:65532$", runtime, flags=re.M)
    assert "HEALTHCHECK" in runtime and "/healthz" in runtime
    assert 'ENTRYPOINT ["fleet-controller"]' in runtime


def test_the_image_carries_the_oci_labels_and_its_commit() -> None:
    runtime = DOCKERFILE.rsplit("\nFROM ", 1)[1]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert f"ARG VERSION={project['version']}\n" in runtime
    for label, value in (
        ("version", "${VERSION}"),
        ("revision", "${REVISION}"),
        ("source", "${SOURCE}"),
        ("licenses", project["license"]),
    ):
        assert f'org.opencontainers.image.{label}="{value}"' in runtime, label
    assert "ARG REVISION=unknown\n" in runtime and "ARG SOURCE=https://" in runtime
    # The build stage records the same REVISION where fleet.builds reads it, before installing the package.
    build = stage("build")
    assert "ARG REVISION=unknown\n" in build
    recorded = build.index("""printf '{"revision": "%s"}\\n' "${REVISION}" > fleet/build.json""")
    assert recorded < build.index("pip install")
    assert "fleet/build.json" in (ROOT / ".dockerignore").read_text().split()
