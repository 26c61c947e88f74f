"""One run of the operator stage: observe, preflight, guards, CRDs, upgrade; each step its own module.

This module only orders the steps and turns their answers into the release's ChangeSet
entry, the stage's proposal (``propose``): ``unchanged`` when the deployed release already has
the declared chart version and values, a refusal when a preflight check or a guard says no
(``refusal`` keeps why, for the run that stops on it), and otherwise the change helm would make,
classed (``disruption``). The run decides it as it decides every change (held, refused, sent:
``fleet.engine.operatorsteps``), the same for ``diff`` and apply; ``execute`` then runs helm for a
``write`` decision only (``decisions.require``). ``detail`` (``fleetctl diff``) adds the chart's
objects, dry-run one by one, beside the release's entry.

``prepare`` runs before the apply writes anything, in any stage: when the release is to change
it fetches the chart and renders it with the cluster's capabilities, so a chart repository
that answers 404 or cannot be reached, a version it lacks, values the chart's
``values.schema.json`` or its own validations refuse stop the run as ``ChartRefused`` at the
GPUOperator's file:line, with nothing written. ``run`` then reuses what it read.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from dataclasses import dataclass, field
from typing import Any

from fleet import helm
from fleet.engine import decisions, disruptions, preflights
from fleet.engine.changesets import Action, Change
from fleet.engine.drivers import ReleaseStatus, driver_states
from fleet.engine.operators import capabilities, crds, guards, noops, renders, restarts, upgrades
from fleet.engine.operators.releases import Observed, OperatorRefused, observe, release_ref, summary
from fleet.engine.plans import Plan
from fleet.kube import Client, Ref
from fleet.telemetry import tracing

PREFLIGHT = ("kubernetes-version", "dra-api", "gpu-nodes")
"""The preflight checks run before an install or upgrade (the ClusterPolicy one is a guard)."""


def _unreadable(err: helm.HelmError) -> bool:
    """helm could not get the chart at all (repository, version), as opposed to rendering it."""
    text = f"{err.what} {err.stderr}"
    markers = ("not a valid chart repository", "cannot be reached", "not found in", "failed to fetch")
    return any(m in text for m in markers) and "execution error at" not in text


@dataclass
class Stage:
    """One run of the operator stage for a plan: ``propose``, then (decided ``write``) ``execute``."""

    client: Client
    h: helm.Helm
    plan: Plan
    detail: bool = False
    """Also dry-run the chart's objects one by one beside the release (``fleetctl diff``)."""
    timeout: float = 120.0
    changes: list[Change] = field(default_factory=list)
    changed: bool = False
    observed: Observed | None = None
    """The release as ``prepare`` read it (``run`` reads it itself otherwise)."""
    chart_crds: list[dict[str, Any]] | None = None
    """The chart's CRDs as ``prepare`` fetched them."""
    rendered: list[dict[str, Any]] | None = None
    """The chart's objects as ``prepare`` rendered them (what ``restarts`` compares with the release's)."""
    refusal: guards.Problem | None = None
    """Why the release was refused (reason, fix), when it was: the apply stops on it (``OperatorRefused``)."""
    _upgrade: _Upgrade | None = None
    """What ``execute`` needs of the proposal: the release observed, the chart and its CRDs."""
    remembered: noops.Noops | None = None
    """Release records remembered between runs (the controller's): an unchanged release costs no helm."""
    _noop: _Noop = field(default_factory=lambda: _Noop())
    """What the remembered release records said, asked once."""

    async def _unchanged_without_helm(self) -> bool:
        desired = self.plan.operator
        if desired is None or self.remembered is None or self._noop.checked:
            return False
        self._noop.checked = True
        key = await noops.key(client=self.client, desired=desired, noops=self.remembered)
        self._noop.key = key
        return key is not None and await noops.unchanged(
            client=self.client, desired=desired, noops=self.remembered, key=key
        )

    async def prepare(self) -> None:
        """Before any stage writes: fetch and render the chart if the release is to change.

        Raises ``ChartRefused`` (where: the GPUOperator's file:line) when the chart cannot be
        fetched or refuses to render. Reads only; a release that is unchanged costs ``helm list``.
        """
        desired = self.plan.operator
        if desired is None:
            return
        if await self._unchanged_without_helm():
            self._noop.known = True
            return
        try:
            self.observed = await observe(h=self.h, release=desired.release, namespace=desired.namespace)
        except helm.HelmError:
            return  # run() reports it (a refusal naming the missing rights)
        obs = self.observed
        running = obs.release.chart_version(desired.chart) if obs.release else None
        if (
            obs.release is not None
            and obs.release.status == "deployed"
            and running == desired.version
            and obs.values == desired.values
        ):
            return
        chart = helm.ChartRef(repository=desired.repository, name=desired.chart, version=desired.version)
        caps = await capabilities.from_cluster(self.client)
        try:
            # One render with the CRDs: the chart's and those of the subcharts the values enable
            # (NVIDIA's node-feature-discovery's only while nfd.enabled: a separately installed NFD
            # keeps its CRDs, neither taken over nor refused as another release's).
            rendered = await renders.rendered(self.h, chart, desired=desired, caps=caps, include_crds=True)
        except helm.HelmError as err:
            if _unreadable(err):
                raise renders.ChartUnavailable(
                    f"cannot read chart {desired.chart} {desired.version} from {desired.repository}: {err.what}",
                    where=desired.source,
                    hint="check that spec.chart.repository, name and version exist and can be reached from here "
                    f"(helm show chart {desired.chart} --repo {desired.repository} --version {desired.version})",
                ) from err
            what, _, hint = renders.refusal(err, desired=desired).partition("\n  hint: ")
            raise renders.ChartRefused(
                what.removeprefix(f"{desired.source}: "), where=desired.source, hint=hint
            ) from err
        self.chart_crds = [o for o in rendered if o.get("kind") == "CustomResourceDefinition"]
        self.rendered = rendered

    @property
    def where(self) -> str:
        source = self.plan.operator.source if self.plan.operator else ""
        return f"{source} (cluster {self.plan.cluster})" if source else f"cluster {self.plan.cluster}"

    def _refuse(self, ref: Ref, problem: guards.Problem, *, seen: ReleaseStatus) -> None:
        reason, fix = problem
        self.refusal = problem
        change = Change.refusal(
            ref,
            stage="operator",
            error=f"the operator release was not changed: {reason}\n  hint: {fix}",
            reason=seen.text(),
            operator=seen,
        )
        self.changes.append(change)

    def refused(self, change: Change | None) -> OperatorRefused | None:
        """The error that stops an apply whose release was refused; ``change``: its entry, decided."""
        if self.refusal is None:
            return None
        reason, fix = self.refusal
        return OperatorRefused(
            f"the operator release was not changed: {reason}", where=self.where, hint=fix, change=change
        )

    async def propose(self) -> list[Change]:
        """The release's entry as the cluster and the chart say (and, with ``detail``, the chart's objects)."""
        desired = self.plan.operator
        assert desired is not None, "no GPUOperator: the removal is proposed by operatorsteps"
        ref = release_ref(release=desired.release, namespace=desired.namespace)
        chart = helm.ChartRef(repository=desired.repository, name=desired.chart, version=desired.version)
        if self._noop.known or await self._unchanged_without_helm():
            seen = ReleaseStatus(
                version=desired.version,
                limit=desired.driver_state_timeout,
                checked=datetime.datetime.now(datetime.UTC),
                drivers=tuple(await driver_states(self.client)),
            )
            self.changes.append(
                Change(ref=ref, stage="operator", action=Action.UNCHANGED, reason=seen.text(), operator=seen)
            )
            return self.changes
        try:
            obs = self.observed or await observe(h=self.h, release=desired.release, namespace=desired.namespace)
        except helm.HelmError as err:
            if not helm.forbidden(err):
                raise
            seen = ReleaseStatus(
                version="", limit=desired.driver_state_timeout, checked=datetime.datetime.now(datetime.UTC)
            )
            self._refuse(
                ref,
                (f"helm may not read release {desired.namespace}/{desired.release}: {err.what}", err.hint),
                seen=seen,
            )
            return self.changes
        running = obs.release.chart_version(desired.chart) if obs.release else None
        before = summary(obs.release, obs.values, chart=desired.chart) if obs.release else None
        after = {"chart": f"{desired.repository} {desired.chart}", "version": desired.version, "values": desired.values}
        same = (
            obs.release is not None
            and obs.release.status == "deployed"
            and running == desired.version
            and obs.values == desired.values
        )
        seen = ReleaseStatus(
            version=running or "",
            limit=desired.driver_state_timeout,
            checked=datetime.datetime.now(datetime.UTC),
            drivers=tuple(await driver_states(self.client)),
        )
        states = seen.text()
        if same:
            if self.remembered is not None and self._noop.key is not None and obs.release is not None:
                await noops.remember(
                    client=self.client,
                    desired=desired,
                    noops=self.remembered,
                    key=self._noop.key,
                    revision=obs.release.revision,
                )
            self.changes.append(
                Change(ref=ref, stage="operator", action=Action.UNCHANGED, reason=states, operator=seen)
            )
            return self.changes
        action = Action.CONFIGURED if obs.release else Action.CREATED
        change = Change(
            ref=ref, stage="operator", action=action, before=before, after=after, reason=states, operator=seen
        )
        for check in await preflights.run(client=self.client, plan=self.plan, only=PREFLIGHT):
            if not check.ok:
                self._refuse(ref, (f"preflight check {check.name} failed: {check.detail}", check.hint), seen=seen)
                return self.changes
        for problem in (
            guards.values_problem(desired.values),
            await guards.clusterpolicy_problem(self.client, desired=desired),
            guards.dra_release_problem(obs.releases, desired=desired),
            guards.version_problem(desired, running=running),
        ):
            if problem:
                self._refuse(ref, problem, seen=seen)
                return self.changes
        if running and guards.parse_version(desired.version) < guards.parse_version(running):
            claims = await guards.allocated_claims(self.client)
            if claims:
                self._refuse(ref, guards.claims_block(claims, what="downgrading"), seen=seen)
                return self.changes
        try:
            chart_crds = self.chart_crds if self.chart_crds is not None else await self.h.crds(chart)
        except helm.HelmError as err:
            why = (
                f"{desired.source}: cannot read chart {chart}: {err.what}\n  hint: check that "
                "spec.chart.repository, name and version can be reached from here (helm show chart ...)"
            )
            self.changes.append(change.replaced(error=why))
            return self.changes
        live_crds = await crds.live_crds(self.client)
        for problem in guards.crd_owner_problems(chart_crds, live_crds, desired=desired):
            self._refuse(ref, problem, seen=seen)
            return self.changes
        for problem in await crds.dropped(self.client, chart_crds, live_crds):
            self._refuse(ref, problem, seen=seen)
            return self.changes
        change = change.replaced(disruption=await self._disruption(obs, chart=chart))
        if obs.release is not None and obs.release.status in upgrades.PENDING:
            recovers = f"release is {obs.release.status}: apply recovers it first"
            change = change.replaced(reason="\n".join(filter(None, (change.reason, recovers))))
        self.changes.append(change)
        self._upgrade = _Upgrade(observed=obs, chart=chart, chart_crds=chart_crds, seen=seen)
        if self.detail:
            self.changes += await renders.object_diff(
                client=self.client, h=self.h, chart=chart, desired=desired, chart_crds=chart_crds
            )
        return self.changes

    async def execute(self, change: Change) -> Change:
        """Install or upgrade the release as ``change``, its entry decided ``write``, says (refuses any
        other); the entry's result: the states seen and the remediation, or why it failed."""
        desired = self.plan.operator
        up = self._upgrade
        assert desired is not None and up is not None, "execute follows a proposal with a release to change"
        obs, chart, seen = up.observed, up.chart, up.seen
        decisions.require(change.decision, what=change.ref)
        attributes = {
            tracing.KIND: change.ref.kind,
            tracing.NAMESPACE: change.ref.namespace,
            tracing.NAME: change.ref.name,
            tracing.ACTION: str(change.action),
            tracing.FIELD_MANAGER: "helm",
        }
        with tracing.tracer().start_as_current_span("apply object", attributes=attributes) as span:
            started = time.monotonic()
            recovered, locked = await self._recover(obs)
            if recovered is None:
                return change.replaced(error=locked, duration=time.monotonic() - started)
            await crds.apply(self.client, up.chart_crds, timeout=self.timeout, where=self.where)
            outcome = await upgrades.upgrade(self.h, client=self.client, chart=chart, desired=desired)
            took = time.monotonic() - started
            remedied = "; ".join(filter(None, (recovered, outcome.remedied)))
            if outcome.error is not None:
                span.set_attribute("error.type", type(outcome.error).__name__)
                status = dataclasses.replace(seen, remedied=remedied)
                return change.replaced(error=outcome.said, duration=took, operator=status)
        self.changed = True
        status = dataclasses.replace(seen, version=desired.version, remedied=remedied)
        return change.replaced(duration=took, operator=status)

    async def _disruption(self, obs: Observed, *, chart: helm.ChartRef) -> disruptions.Disruption | None:
        """Whether the upgrade restarts the driver, the device plugin or the DRA kubelet plugin: the
        release's stored manifest against the new render (``restarts``). A first install restarts
        nothing; a release whose manifest cannot be read is taken to restart everything it renders."""
        desired = self.plan.operator
        if desired is None or obs.release is None:
            return None
        try:
            before = await self.h.manifest(name=desired.release, namespace=desired.namespace)
            after = self.rendered
            if after is None:
                caps = await capabilities.from_cluster(self.client)
                after = await renders.rendered(self.h, chart, desired=desired, caps=caps)
                self.rendered = after
        except helm.HelmError as err:
            return disruptions.Disruption(
                reason=f"may restart the driver and the DRA kubelet plugin: helm could not render the release "
                f"to compare ({err.what})"
            )
        restart = restarts.restarted(before=before, after=after)
        if restart is None:
            return None
        reads = disruptions.Reads(client=self.client)
        return restarts.disruption(
            restart,
            slices=await reads.objects(disruptions.SLICE),
            claims=await reads.objects(disruptions.CLAIM),
        )

    async def _recover(self, obs: Observed) -> tuple[str | None, str]:
        """Free a release left ``pending-*``: what was done ("" nothing needed), or None and why it is still
        locked or could not be freed."""
        desired = self.plan.operator
        if desired is None or obs.release is None or obs.release.status not in upgrades.PENDING:
            return "", ""
        try:
            return await upgrades.recover(
                self.h, desired=desired, status=obs.release.status, now=datetime.datetime.now(datetime.UTC)
            ), ""
        except helm.HelmError as err:
            return None, str(err) + (f"\n  hint: {err.hint}" if err.hint else "")


@dataclass
class _Noop:
    """What the remembered release records said (``noops``): asked once per run."""

    known: bool = False
    """``prepare`` found the release unchanged without helm."""
    key: str | None = None
    checked: bool = False


@dataclass(frozen=True)
class _Upgrade:
    """The release to install or upgrade, as ``propose`` found it."""

    observed: Observed
    chart: helm.ChartRef
    chart_crds: list[dict[str, Any]]
    seen: ReleaseStatus


__all__ = ["PREFLIGHT", "Stage"]
