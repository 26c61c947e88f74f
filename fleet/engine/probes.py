"""What a live cluster keeps: its DRA feature gates, seen rather than declared.

A Cluster declares its Kubernetes minor and feature gates, but a managed
control plane may run other defaults, and nobody can read a kube-apiserver's
``--feature-gates`` from outside. What can be seen is the effect: the server
drops a field whose gate is off. So ``fleetctl validate --context`` sends, per
gate, one object carrying a gated field as a server-side dry run
(``dryRun=All``: nothing is stored, admission and validation still run) and
looks for the field in the answer (``fleet.policy.gateprobes.PROBES``), reads
the served ``resource.k8s.io`` versions from discovery and the minor from
``/version``. A probe the server refuses for another reason (RBAC, a quota in
``default``) tells nothing: that gate stays as the Cluster declares it.
"""

from __future__ import annotations

from fleet import kube
from fleet.kube import errors
from fleet.manifests import Revision
from fleet.policy import featuregates, gateprobes

FIELD_MANAGER = "fleet-gate-probe"
Features = featuregates.ClusterFeatures


def declared(revision: Revision, *, cluster: str) -> Features | None:
    """What ``cluster``'s Cluster declares (None when it does not load)."""
    found = next((m for m in revision.of_kind("Cluster") if m.name == cluster), None)
    return featuregates.declared(found) if found is not None else None


async def observe_context(context: str, kubeconfig: str | None, *, declared: Features) -> Features:
    """:func:`observe` over a client of its own for ``context`` (as kubectl reads the kubeconfig)."""
    client = await kube.connect(kubeconfig=kubeconfig, context=context, timeout=30)
    try:
        return await observe(client, declared=declared)
    finally:
        await client.close()


async def observe(client: kube.Client, *, declared: featuregates.ClusterFeatures) -> featuregates.ClusterFeatures:
    """``declared`` replaced by what the cluster behind ``client`` shows."""
    version = await client.version()
    minor = featuregates.minor_of(f"{version.get('major', '1')}.{version.get('minor', '0')}")
    served = frozenset(k.api_version for k in await client.discover())
    seen = {probe.gate: await _probe(client, probe) for probe in gateprobes.PROBES}
    return gateprobes.observed(declared, minor=minor, served=served, seen=seen, source=f"live context {client.context}")


async def _probe(client: kube.Client, probe: gateprobes.Probe) -> bool | None:
    try:
        answer = await client.apply(dict(probe.body), field_manager=FIELD_MANAGER, dry_run=True, force=True)
    except errors.Invalid as err:
        return probe.invalid if probe.invalid_says and probe.invalid_says in err.what else None
    except errors.Unreachable:
        raise
    except errors.KubeError:  # Forbidden (RBAC), a quota, a webhook: this probe tells nothing
        return None
    return gateprobes.kept(answer, probe.path)


__all__ = ["FIELD_MANAGER", "Features", "declared", "observe", "observe_context"]
