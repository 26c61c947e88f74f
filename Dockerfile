# fleet's image: fleet-controller (the default command) and fleetctl, pinned by constraints.txt.
# In a cluster: kubectl apply -k overlays/single-replica (or overlays/ha); see docs/install.md.
# fleetctl:     docker run --rm -v "$PWD:/repo" --entrypoint fleetctl fleet validate /repo
# Labels and --version: pass the commit, e.g.
#   docker build --build-arg REVISION="$(git rev-parse HEAD)" -t fleet .
# REVISION becomes org.opencontainers.image.revision and fleet/build.json, which
# `fleetctl --version` and `fleet-controller --version` print (docs/install.md); VERSION is
# pyproject.toml's (tests/install/test_dockerfile.py keeps them in step).
# helm for the GPU Operator stage, built from its Go module as the sandbox builds it
# (fleet/sandbox/binaries.py; the version is fleet/sandbox/versions.py HELM, checked by
# tests/install/test_dockerfile.py).
FROM golang:1.26-bookworm AS helm
ARG HELM_VERSION=v3.21.4
RUN CGO_ENABLED=0 GOBIN=/out go install \
      -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
      "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"

FROM python:3.11-slim AS build
ARG REVISION=unknown
# A CA bundle for pip where a TLS-intercepting proxy re-signs PyPI (./dev image passes the host's);
# empty: pip's own.
ARG PIP_CERT=
# binutils: strip debug symbols from the wheels' compiled modules (cel_expr_python ships them).
RUN apt-get update \
 && apt-get install -y --no-install-recommends binutils \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY fleet ./fleet
COPY fleetctl ./fleetctl
# The venv holds fleet and what it imports, nothing else: not the venv's seed (pip, setuptools),
# not cffi's C parser (pycparser), which fleet never reaches; no C sources shipped beside compiled
# modules; no debug symbols. (markdown-it-py stays: the console renders the diff's markdown.)
RUN printf '{"revision": "%s"}\n' "${REVISION}" > fleet/build.json \
 && python -m venv /opt/fleet \
 && /opt/fleet/bin/pip install --no-cache-dir -c constraints.txt . \
 && /opt/fleet/bin/pip uninstall --yes --quiet pycparser setuptools \
 && /opt/fleet/bin/pip uninstall --yes --quiet pip \
 && find /opt/fleet -type f \( -name '*.c' -o -name '*.pyx' -o -name '*.pxd' \) -delete \
 && find /opt/fleet -type f -name '*.so*' -exec strip --strip-unneeded {} +

FROM python:3.11-slim
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/gpufleet/fleet
LABEL org.opencontainers.image.title="fleet" \
      org.opencontainers.image.description="GitOps controller for Kubernetes GPU fleets that use Dynamic Resource Allocation" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0"
# git: the controller's source (and fleetctl on a checkout) runs git; ssh for ssh:// remotes.
# dpkg leaves out what fleet never runs: Perl (git depends on it only for send-email, svn and the
# like; the base image's perl-base stays), git's servers and mail tools, and OpenSSH's tools
# but the ssh client and agent (whose package script needs it): scp, sftp, the setuid ssh-keysign.
RUN printf 'path-exclude=%s\n' /usr/share/perl/\* /usr/share/perl5/\* '/usr/lib/*/perl/*' '/usr/lib/*/libperl.so*' \
      /usr/lib/git-core/git-daemon /usr/lib/git-core/git-http-backend /usr/lib/git-core/git-http-push \
      /usr/lib/git-core/git-imap-send /usr/lib/git-core/git-shell /usr/lib/git-core/scalar \
      /usr/bin/scp /usr/bin/sftp /usr/bin/ssh-add /usr/bin/ssh-keygen /usr/bin/ssh-keyscan \
      /usr/lib/openssh/\* \
      > /etc/dpkg/dpkg.cfg.d/fleet-unused \
 && apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/log/apt /var/log/dpkg.log \
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
