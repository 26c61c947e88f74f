"""Reading the GPU nodes' driver-upgrade states against the sandbox: since when (managedFields), the
node's Events, and an identity that may list Nodes but not Events (the in-cluster fleet-applier)."""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Iterator

import pytest

from fleet import kube
from fleet.engine import drivers
from tests.conftest import Kubectl

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio]

NODE = "h100x8-02"


@pytest.fixture()
def upgrading(kubectl: Kubectl) -> Iterator[str]:
    kubectl("label", "node", NODE, f"{drivers.UPGRADE_STATE}=wait-for-jobs-required", "--overwrite")
    name = f"{NODE}.{uuid.uuid4().hex[:8]}"
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": NODE},
        "reason": "JobsRunning",
        "message": "waiting for job ml/train to finish",
        "type": "Normal",
        "lastTimestamp": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    kubectl("create", "-f", "-", stdin=json.dumps(event))
    yield name
    kubectl("label", "node", NODE, f"{drivers.UPGRADE_STATE}-")
    kubectl("delete", "event", "-n", "default", name, "--ignore-not-found")


@pytest.fixture()
def nodes_only(kubectl: Kubectl) -> Iterator[None]:
    """alice may list Nodes, not Events: as the in-cluster fleet-applier ClusterRole."""
    name = f"t-nodes-{uuid.uuid4().hex[:6]}"
    kubectl("create", "clusterrole", name, "--verb=get,list", "--resource=nodes")
    kubectl("create", "clusterrolebinding", name, f"--clusterrole={name}", "--user=alice")
    yield
    kubectl("delete", "clusterrolebinding", name, "--ignore-not-found")
    kubectl("delete", "clusterrole", name, "--ignore-not-found")


async def test_states_carry_since_and_the_nodes_events(admin_client: kube.Client, upgrading: str) -> None:
    before = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1)
    found = {d.node: d for d in await drivers.driver_states(admin_client)}
    state = found[NODE]
    assert state.state == "wait-for-jobs-required"
    assert state.since is not None and state.since >= before
    assert "JobsRunning: waiting for job ml/train to finish" in state.events


@pytest.mark.usefixtures("upgrading", "nodes_only")
async def test_an_identity_that_may_not_list_events_still_gets_the_states(restricted_client: kube.Client) -> None:
    found = {d.node: d for d in await drivers.driver_states(restricted_client)}
    assert found[NODE].state == "wait-for-jobs-required"
    assert len(found[NODE].events) == 1 and "may not list events in namespace default" in found[NODE].events[0]
