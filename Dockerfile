# fleet's image: fleet-controller (the default command) and fleetctl, pinned by constraints.txt.
# In a cluster: kubectl apply -k overlays/single-replica (or overlays/ha); see docs/install.md.
# fleetctl:     docker run --rm -v "$PWD:/repo" --entrypoint fleetctl fleet validate /repo
# helm for the GPU Operator stage, built from its Go module as the sandbox builds it
# (fleet/sandbox/binaries.py; the version is fleet/sandbox/versions.py HELM, checked by
# tests/install/test_dockerfile.py).
FROM golang:1.26-bookworm AS helm
ARG HELM_VERSION=v3.21.4
RUN CGO_ENABLED=0 GOBIN=/out go install \
      -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
      "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY fleet ./fleet
COPY fleetctl ./fleetctl
RUN python -m venv /opt/fleet \
 && /opt/fleet/bin/pip install --no-cache-dir -c constraints.txt .

FROM python:3.11-slim
# git: the controller's source (and fleetctl on a checkout) runs git; ssh for ssh:// remotes.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 65532 --no-create-home --home-dir /var/cache/fleet fleet \
 && mkdir -p /var/cache/fleet && chown 65532:65532 /var/cache/fleet
COPY --from=build /opt/fleet /opt/fleet
COPY --from=helm /out/helm /usr/local/bin/helm
COPY schemas /opt/fleet/share/fleet/schemas
ENV PATH=/opt/fleet/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    HOME=/var/cache/fleet FLEET_STATE_DIR=/var/cache/fleet
USER 65532:65532
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["fleet-controller"]
