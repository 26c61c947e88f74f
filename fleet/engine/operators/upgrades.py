"""``helm upgrade --install``, what follows when it fails, and releases nobody finishes.

helm installs or upgrades with exactly the declared values (``--reset-values``), labelled
``app.kubernetes.io/managed-by=fleet``, with its own ``--timeout`` shorter than the deadline
at which fleet kills the process (``helm.Settings.operation_timeout``): helm then gives up on
a hook by itself and records the revision as failed. A killed helm records nothing, and the
release stays ``pending-*``: every later helm call fails with "another operation
(install/upgrade/rollback) is in progress", for good.

A failure is remediated by the GPUOperator's ``spec.remediation``, as Flux's helm-controller
does: ``rollback`` (the default) returns to the last deployed revision, or uninstalls a first
install that never deployed; ``uninstall`` removes the release; ``none`` leaves it failed.
``retries`` more attempts follow in the same run. The entry's error names the hook or
resource that did not become ready and why, from its pods' Events (``FailedScheduling ...
untolerated taint``), not only helm's "timed out waiting for the condition".

A release found ``pending-install|upgrade|rollback`` is recovered when nobody can still be
running its operation: fleet holds the cluster's writer Lease (so no other fleet writer
runs), and the record is older than helm's own timeout (so no helm started by fleet still
runs). It is rolled back to the last deployed revision, or uninstalled when none ever
deployed; the entry says so (``ReleaseStatus.remedied``: a status line and an Event), and the
declared change is then made as usual.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from fleet import helm
from fleet.engine.operators.releases import condition, events
from fleet.engine.operators.renders import refusal
from fleet.engine.plans import OperatorRelease
from fleet.kube import Client, KubeError, NotFound, Ref, timestamps

PENDING = ("pending-install", "pending-upgrade", "pending-rollback")
GOOD = ("deployed", "superseded")


@dataclass(frozen=True)
class Outcome:
    """What ``upgrade`` did: the last helm error (None: installed), the remediation lines, and the
    release entry's error text (why it failed, each attempt; "" when installed)."""

    error: helm.HelmError | None
    remedied: str = ""
    said: str = ""


async def upgrade(h: helm.Helm, *, client: Client, chart: helm.ChartRef, desired: OperatorRelease) -> Outcome:
    """Install or upgrade the release, remediating each failure; ``Outcome.said`` says why it failed."""
    attempts = 1 + desired.retries
    remedied: list[str] = []
    earlier: list[str] = []
    failed: helm.HelmError | None = None
    error = ""
    for attempt in range(1, attempts + 1):
        try:
            await h.upgrade(chart, release=desired.release, namespace=desired.namespace, values=desired.values)
        except helm.HelmError as err:
            failed = err
            why = await explain(h, client=client, desired=desired)
            done = await remediate(h, desired=desired)
            said = refusal(err, desired=desired) if "execution error at (" in err.what else str(err)
            error = said + "".join(f"\n  {line}" for line in (*why, done) if line)
            if done:
                remedied.append(done)
            if attempt < attempts:
                earlier.append(
                    f"attempt {attempt} of {attempts} failed ({err.what.splitlines()[0][:200]}); "
                    f"{done or 'nothing to remediate'}; retrying ({attempt} of {desired.retries} retries)"
                )
            continue
        if failed is not None:
            remedied.append(f"succeeded on attempt {attempt} of {attempts}")
        return Outcome(error=None, remedied="; ".join(remedied))
    if attempts > 1:
        error += "".join(f"\n  {line}" for line in earlier)
        error += f"\n  gave up after {attempts} attempts (spec.remediation.retries: {desired.retries})"
    return Outcome(error=failed, remedied="; ".join(remedied), said=error)


async def remediate(h: helm.Helm, *, desired: OperatorRelease) -> str:
    """Apply ``spec.remediation`` to a release helm just failed; what was done ("" when nothing)."""
    history = await h.history(name=desired.release, namespace=desired.namespace)
    if not history or history[-1].get("status") not in ("failed", *PENDING):
        return ""  # helm refused before writing a revision: nothing to remediate
    failed = int(history[-1]["revision"])
    if desired.remediation == "none":
        return f"revision {failed} left failed (spec.remediation.strategy: none)"
    good = [e for e in history[:-1] if e.get("status") in GOOD]
    if desired.remediation == "rollback" and good:
        target = int(good[-1]["revision"])
        try:
            await h.rollback(name=desired.release, namespace=desired.namespace, revision=target)
        except helm.HelmError as err:
            return f"rollback to revision {target} failed too: {err.what}"
        return f"rolled back to revision {target} (spec.remediation.strategy: rollback)"
    why = "no revision ever deployed" if not good else "spec.remediation.strategy: uninstall"
    try:
        await h.uninstall(name=desired.release, namespace=desired.namespace)
    except helm.HelmError as err:
        return f"uninstall failed too: {err.what}"
    return f"uninstalled the release ({why})"


async def recover(h: helm.Helm, *, desired: OperatorRelease, status: str, now: datetime.datetime) -> str:
    """Free a release left ``pending-*`` by an operation nobody runs any more; what was done.

    Raises ``Locked`` while the record is younger than helm's own timeout: a helm started by
    this or another fleet process may still be running the operation.
    """
    history = await h.history(name=desired.release, namespace=desired.namespace)
    if not history:
        return ""
    last = history[-1]
    since = updated(last)
    limit = h.settings.operation_timeout
    age = (now - since).total_seconds() if since else float(limit)
    if age < limit:
        raise Locked(
            f"release {desired.namespace}/{desired.release} is {status} since {_stamp(since)} "
            f"({age:.0f}s ago): a helm operation may still be running",
            where=desired.source,
            hint=f"fleet recovers it once the record is older than helm's own timeout ({limit}s) and retries",
        )
    good = [e for e in history[:-1] if e.get("status") in GOOD]
    what = f"release was {status} (revision {last['revision']}, since {_stamp(since)}) and nobody ran its operation"
    if good:
        target = int(good[-1]["revision"])
        await h.rollback(name=desired.release, namespace=desired.namespace, revision=target)
        return f"{what}: rolled back to revision {target}"
    await h.uninstall(name=desired.release, namespace=desired.namespace)
    return f"{what}: uninstalled (no revision ever deployed)"


class Locked(helm.HelmError):
    """The release is ``pending-*`` and its operation may still be running: try again later."""


def updated(entry: dict[str, Any]) -> datetime.datetime | None:
    """When helm wrote a history entry (``updated``: RFC 3339 with nanoseconds)."""
    return timestamps.parse(entry.get("updated"))


def _stamp(when: datetime.datetime | None) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else "an unknown time"


async def explain(h: helm.Helm, *, client: Client, desired: OperatorRelease) -> list[str]:
    """Why the last revision failed: each hook that did not complete, with its pods' state and Events."""
    try:
        history = await h.history(name=desired.release, namespace=desired.namespace)
        if not history:
            return []
        hooks = await h.hooks(name=desired.release, namespace=desired.namespace, revision=int(history[-1]["revision"]))
    except helm.HelmError:
        return []
    out: list[str] = []
    for hook in hooks:
        if hook.get("kind") not in ("Job", "Pod"):
            continue
        meta = hook.get("metadata") or {}
        namespace = meta.get("namespace") or desired.namespace
        name = str(meta.get("name", ""))
        phase = (meta.get("annotations") or {}).get("helm.sh/hook", "hook")
        try:
            why = await _hook_problem(client, kind=hook["kind"], namespace=namespace, name=name)
        except KubeError:
            continue
        if why:
            out.append(f"{phase} hook {hook['kind']} {namespace}/{name}: {why}")
    return out


async def _hook_problem(client: Client, *, kind: str, namespace: str, name: str) -> str:
    api_version = "batch/v1" if kind == "Job" else "v1"
    try:
        obj = await client.get(Ref(api_version=api_version, kind=kind, namespace=namespace, name=name))
    except NotFound:
        return "gone (deleted by its hook-delete-policy)" if kind == "Job" else ""
    if kind == "Job":
        if condition(obj, "Complete"):
            return ""
        failed = condition(obj, "Failed")
        pods = await client.list_if_served(
            api_version="v1", kind="Pod", namespace=namespace, label_selector=f"job-name={name}"
        )
        states = [await _pod_problem(client, pod) for pod in pods[-3:]]
        head = f"failed ({failed.get('reason')}: {failed.get('message')})" if failed else "did not complete"
        detail = "; ".join(s for s in states if s) or await _gone_pods(client, namespace=namespace, job=name)
        return f"{head}; {detail}"
    return await _pod_problem(client, obj)


async def _gone_pods(client: Client, *, namespace: str, job: str) -> str:
    """What the Events of a Job's pods said after the Job controller deleted them (a deadline)."""
    found = await client.list_if_served(
        api_version="v1", kind="Event", namespace=namespace, field_selector="involvedObject.kind=Pod"
    )
    mine = [e for e in found if str((e.get("involvedObject") or {}).get("name", "")).startswith(f"{job}-")]
    recent = sorted(mine, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")[-3:]
    if not recent:
        return "no pod left to inspect"
    return "its pods are gone; events: " + " | ".join(f"{e.get('reason')}: {e.get('message')}" for e in recent)


async def _pod_problem(client: Client, pod: dict[str, Any]) -> str:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    name, phase = meta.get("name", ""), status.get("phase", "Unknown")
    if phase == "Succeeded":
        return ""
    terminated = [
        (c.get("name"), (c.get("state") or {}).get("terminated") or {}) for c in status.get("containerStatuses") or ()
    ]
    exits = [f"container {n} exited {t.get('exitCode')} ({t.get('reason', '')})" for n, t in terminated if t]
    seen = await events(client, kind="Pod", name=name, namespace=meta.get("namespace"))
    return f"pod {name} {phase}" + (f", {', '.join(exits)}" if exits else "") + seen


__all__ = ["GOOD", "PENDING", "Locked", "Outcome", "explain", "recover", "remediate", "updated", "upgrade"]
