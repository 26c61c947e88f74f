"""The operator's readiness gate (``Gate.OPERATOR_READY``): when the DRA driver is really serving.

A deployed release says only that helm wrote its objects. The gate waits for what the
guide checks by hand: GPUCluster ``gpu-cluster`` state ready with condition Ready=True,
the kubelet-plugin DaemonSet available, the driver's DeviceClasses present, ResourceSlices
for every node of every pool with the pool's model and count, and no node stuck in one
driver-upgrade state. Watches wake the check, so it passes as soon as the last condition
holds; a timeout lists what is missing with conditions and events.
"""

from __future__ import annotations

import contextlib
import datetime
from typing import Any

import anyio

from fleet.engine import healths, preflights, stages
from fleet.engine.drivers import driver_states
from fleet.engine.operators.releases import DEVICE_CLASSES, GPUCLUSTER, KUBELET_PLUGIN, condition, events
from fleet.engine.plans import Plan
from fleet.kube import Client, NotFound
from fleet.kube import watch as kube_watch


async def ready_problems(*, client: Client, plan: Plan) -> list[str]:
    """What keeps the operator from being ready: GPUCluster, kubelet plugin, DeviceClasses, slices per pool."""
    desired = plan.operator
    if desired is None:
        return []
    problems: list[str] = []
    try:
        await client.kind(api_version=GPUCLUSTER.api_version, kind=GPUCLUSTER.kind)
        gc: dict[str, Any] | None = await client.get(GPUCLUSTER)
    except NotFound:
        await client.discover()
        gc = None
    if gc is None:
        problems.append("GPUCluster gpu-cluster: does not exist (the chart renders it when gpuCluster.deployCR)")
    else:
        status = gc.get("status") or {}
        ready = condition(gc, "Ready")
        if status.get("state") != "ready" or ready is None:
            conds = (
                "; ".join(
                    f"{c.get('type')}={c.get('status')} {c.get('reason', '')}: {c.get('message', '')}".strip()
                    for c in status.get("conditions") or ()
                )
                or "no conditions"
            )
            seen = await events(client, kind="GPUCluster", name="gpu-cluster")
            problems.append(f"GPUCluster gpu-cluster: state {status.get('state') or 'unset'} ({conds}){seen}")
    ds = await client.list_if_served(
        api_version="apps/v1",
        kind="DaemonSet",
        namespace=desired.namespace,
        field_selector=f"metadata.name={KUBELET_PLUGIN}",
    )
    if not ds:
        problems.append(f"DaemonSet {desired.namespace}/{KUBELET_PLUGIN}: does not exist")
    else:
        st = ds[0].get("status") or {}
        want, have = st.get("desiredNumberScheduled", 0), st.get("numberAvailable", 0)
        if want == 0 or have < want:
            seen = await events(client, kind="DaemonSet", name=KUBELET_PLUGIN, namespace=desired.namespace)
            problems.append(f"DaemonSet {desired.namespace}/{KUBELET_PLUGIN}: {have} of {want} pods available{seen}")
    classes = {
        c["metadata"]["name"] for c in await client.list_if_served(api_version="resource.k8s.io/v1", kind="DeviceClass")
    }
    missing = [c for c in DEVICE_CLASSES if c not in classes]
    if missing:
        problems.append(f"DeviceClass {', '.join(missing)}: not installed by the driver")
    problems += await preflights.pool_inventory_problems(client=client, plan=plan)
    now = datetime.datetime.now(datetime.UTC)
    for state in await driver_states(client):
        if state.stuck(now=now, limit=desired.driver_state_timeout):
            problems.append(f"Node {state.text(now=now, limit=desired.driver_state_timeout)}")
    return problems


async def wait_ready(*, client: Client, plan: Plan, timeout: float) -> None:  # noqa: ASYNC109 - the gate's deadline
    """Re-check ``ready_problems`` each time a watched object changes; ``HealthTimeout`` after ``timeout``.

    One watch per kind the gate reads (GPUCluster, DaemonSet, DeviceClass, ResourceSlice)
    wakes the check, so the gate passes as soon as the last condition holds, without
    polling the API server; a check also runs every 10 s in case a watch is slow to start.
    """
    problems: list[str] = []
    send, receive = anyio.create_memory_object_stream[None](1)
    namespace = plan.operator.namespace if plan.operator else None
    watched = [
        (GPUCLUSTER.api_version, GPUCLUSTER.kind, None),
        ("apps/v1", "DaemonSet", namespace),
        ("resource.k8s.io/v1", "DeviceClass", None),
        ("resource.k8s.io/v1", "ResourceSlice", None),
    ]

    async def wake(api_version: str, kind_name: str, ns: str | None) -> None:
        try:
            kind = await client.kind(api_version=api_version, kind=kind_name)
        except NotFound:
            return  # not served yet (the CRD): the periodic check covers it
        async for event in kube_watch(client=client, kind=kind, namespace=ns):
            if event.type != "LISTED":
                with contextlib.suppress(anyio.WouldBlock):
                    send.send_nowait(None)

    with anyio.move_on_after(timeout):
        async with anyio.create_task_group() as tg:
            for api_version, kind_name, ns in watched:
                tg.start_soon(wake, api_version, kind_name, ns)
            while True:
                problems = await ready_problems(client=client, plan=plan)
                if not problems:
                    tg.cancel_scope.cancel()
                    return
                with anyio.move_on_after(10):
                    await receive.receive()
                await anyio.sleep(0.2)  # let a burst of events settle into one check
    raise healths.HealthTimeout(
        stage=stages.by_name("operator"), timeout=timeout, problems=problems, cluster=plan.cluster
    )


__all__ = ["ready_problems", "wait_ready"]
