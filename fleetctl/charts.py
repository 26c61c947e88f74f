"""The GPUOperator's chart rendered without a cluster, for ``fleetctl render`` and ``validate --charts``.

No cluster is asked, so helm renders against what each Cluster's ``kubernetesVersion``
serves with its default feature gates (``fleet.engine.operators.capabilities``), and the
output says so. A chart that refuses (its own validation, or a repository that cannot be
reached) is reported at the GPUOperator's file:line: an error for ``render``, a
``chart-render`` finding for ``validate``. A chart that cannot be fetched is only named as
not rendered by ``render`` (which otherwise needs no network), and is a finding for
``validate --charts``, which asked for it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio

from fleet import helm
from fleet.engine.operators import renders
from fleet.engine.plans import OperatorRelease, Plan
from fleet.engine.renders import plan as plan_of
from fleet.manifests import Finding, Revision, cluster_names, resolve
from fleetctl.pipelines import helm_binary


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--helm",
        metavar="PATH",
        type=Path,
        help="helm binary to render the GPUOperator's chart (default: $FLEET_HELM, else helm on PATH)",
    )
    parser.add_argument(
        "--helm-timeout", type=float, default=300.0, metavar="SECONDS", help="seconds one helm call may take"
    )


def _helm(args: argparse.Namespace) -> helm.Helm | None:
    binary = helm_binary(getattr(args, "helm", None))
    if binary is None:
        return None
    return helm.Helm(helm.Settings(binary=binary, timeout=getattr(args, "helm_timeout", 300.0)))


def _render(h: helm.Helm, desired: OperatorRelease) -> tuple[list[dict[str, Any]], str]:
    chart = helm.ChartRef(repository=desired.repository, name=desired.chart, version=desired.version)
    objects, caps = anyio.run(lambda: renders.offline(h, chart=chart, desired=desired))
    release = f"GPUOperator release {desired.namespace}/{desired.release} ({desired.source})"
    return objects, f"{release}: chart {chart} rendered with {caps.describe()}"


def chart_objects(args: argparse.Namespace, plan: Plan) -> tuple[list[dict[str, Any]], str]:
    """The chart's objects and a line saying what they were rendered against ("" without a GPUOperator).

    Raises ``renders.ChartRefused`` (file:line) when the chart refuses to render; a chart that
    cannot be fetched (no network here) is named as not rendered, as is one without helm.
    """
    desired = plan.operator
    if desired is None:
        return [], ""
    h = _helm(args)
    if h is None:
        release = f"GPUOperator release {desired.namespace}/{desired.release} ({desired.source})"
        return [], f"{release}: chart not rendered: no helm binary (--helm, $FLEET_HELM, helm on PATH)"
    try:
        return _render(h, desired)
    except renders.ChartRefused:
        raise
    except renders.ChartUnavailable as err:
        release = f"GPUOperator release {desired.namespace}/{desired.release} ({desired.source})"
        print(f"warning: {desired.source}: {err.what}\n  hint: {err.hint}", file=sys.stderr)
        return [], f"{release}: chart not rendered: {err.what.splitlines()[0]}"


def chart_findings(
    args: argparse.Namespace, revision: Revision, *, clusters: list[str]
) -> tuple[list[Finding], list[str]]:
    """``chart-render`` findings for each cluster whose GPUOperator's chart refuses, and a note per render."""
    h = _helm(args)
    findings: list[Finding] = []
    notes: list[str] = []
    seen: set[tuple[str, str]] = set()
    for cluster in clusters or cluster_names(revision):
        view = resolve(revision, cluster=cluster)
        manifest = view.operator
        if manifest is None:
            continue
        desired = plan_of(view, revision="").operator
        if desired is None:
            continue
        if h is None:
            notes.append(f"cluster {cluster}: chart not rendered: no helm binary (--helm, $FLEET_HELM, helm on PATH)")
            continue
        try:
            _, said = _render(h, desired)
        except renders.ChartUnavailable as err:
            if (err.what, cluster) in seen:
                continue
            seen.add((err.what, cluster))
            findings.append(
                Finding(
                    manifest.location,
                    "chart-render",
                    f"{err.what} (cluster {cluster}, Kubernetes {desired.kubernetes_version} defaults)",
                    hint=err.hint,
                    object=manifest.ref,
                    cluster=cluster,
                )
            )
            continue
        notes.append(f"cluster {cluster}: {said}")
    return findings, notes


__all__ = ["add_args", "chart_findings", "chart_objects"]
