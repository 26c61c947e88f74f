# fleet's image: fleetctl and the library, pinned by constraints.txt.
# Run as: docker run --rm -v "$PWD:/repo" -e KUBECONFIG=/kube/config -v ~/.kube:/kube fleet validate /repo
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY fleet ./fleet
COPY fleetctl ./fleetctl
RUN python -m venv /opt/fleet \
 && /opt/fleet/bin/pip install --no-cache-dir -c constraints.txt .

FROM python:3.11-slim
# git: the controller and `fleetctl` read fleet repositories through GitPython, which runs git.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 65532 --create-home fleet
COPY --from=build /opt/fleet /opt/fleet
COPY schemas /opt/fleet/share/fleet/schemas
ENV PATH=/opt/fleet/bin:$PATH PYTHONUNBUFFERED=1
USER 65532
ENTRYPOINT ["fleetctl"]
CMD ["--help"]
