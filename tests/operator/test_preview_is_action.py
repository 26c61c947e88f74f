"""Preview = action for the GPU Operator release: real helm, NVIDIA's chart, the sandbox.

The release's decision (``helm-upgrade``, ``helm-uninstall``; held, refused) must be the same in
``diff`` and ``apply`` on the same state (``tests.apply.agreements``). A refusal of the operator
stage (a guard, a preflight check) is an entry decided ``refuse`` in both: the apply's ChangeSet
holds it, whatever else ends the run. Removing the operator while GPU pods hold claims is
disruptive, so it is held like any disruptive change (the default policy ``wait``, a closed window),
not refused.
"""

from __future__ import annotations

import pytest

from fleet import helm
from fleet.sandbox import Sandbox
from fleet.sandbox.operators import StandInOperator
from tests.apply.agreements import Compared, Key, compare
from tests.apply.conftest import Engine
from tests.changes.test_holds import closed_window
from tests.conftest import Kubectl
from tests.operator.conftest import UPSTREAM
from tests.operator.repos import OperatorRepo
from tests.operator.test_stage import trainer_on_a_gpu

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("cleanup_release")]


def chart_objects(key: Key) -> bool:
    """The chart's objects a diff previews beside the release: helm writes them, under the release's one
    decision; the apply records the release alone. Left out of the comparison."""
    stage, ref = key
    return stage == "operator" and ref.split("/")[1] != "HelmRelease"


@pytest.fixture()
def fleet(sandbox: Sandbox, op_repo: OperatorRepo) -> Engine:
    return Engine(sandbox, op_repo)


def release(compared: Compared) -> dict[str, object]:
    return compared.both(kind="HelmRelease", name="gpu-operator", stage="operator")


def test_a_refused_downgrade_is_an_entry_decided_refuse_in_diff_and_apply(
    sandbox: Sandbox, fleet: Engine, op_repo: OperatorRepo, helm_settings: helm.Settings
) -> None:
    op_repo.version = "v26.7.1"
    with StandInOperator(sandbox, upstream=UPSTREAM):
        assert not fleet.apply(helm=helm_settings).failed
    op_repo.version = "v26.7.0"  # a downgrade, without upgrade.allowDowngrade

    compared = compare(fleet, helm=helm_settings, stops=True, ignore=chart_objects)
    decided = release(compared)
    assert decided["verdict"] == "refuse" and decided.get("verb") == "helm-upgrade", decided
    [entry] = [e for e in compared.apply.entries if e.ref.kind == "HelmRelease"]
    assert "allowDowngrade" in entry.error, entry.error


def test_a_failed_preflight_is_an_entry_decided_refuse_in_diff_and_apply(
    fleet: Engine, op_repo: OperatorRepo, helm_settings: helm.Settings
) -> None:
    """The first install, for a pool whose selector finds no node: preflight ``gpu-nodes`` fails."""
    op_repo.pool(
        "none",
        selector={"sandbox.fleet.gpufleet.dev/pool": f"absent-{op_repo.id}"},
        labels={f"t{op_repo.id}.example.com/pool": "none"},
    )
    compared = compare(fleet, helm=helm_settings, stops=True, ignore=chart_objects)
    decided = release(compared)
    assert decided["verdict"] == "refuse" and decided.get("verb") == "helm-upgrade", decided
    [entry] = [e for e in compared.apply.entries if e.ref.kind == "HelmRelease"]
    assert "preflight check gpu-nodes failed" in entry.error, entry.error


def test_an_upgrade_and_an_uninstall_with_gpu_pods_are_held_in_diff_and_apply(
    sandbox: Sandbox,
    fleet: Engine,
    op_repo: OperatorRepo,
    helm_settings: helm.Settings,
    kubectl: Kubectl,
    namespace: str,
) -> None:
    with StandInOperator(sandbox, upstream=UPSTREAM):
        assert not fleet.apply(helm=helm_settings).failed
    trainer_on_a_gpu(kubectl, namespace)
    kubectl("wait", "-n", namespace, "pod/trainer", "--for=condition=Ready", "--timeout=60s")
    values = op_repo.values

    # A new DRA kubelet plugin restarts it on every GPU node: held for the claims (policy wait).
    op_repo.values = {**values, "draDriver": {**values["draDriver"], "version": "v0.6.0"}}
    upgrade = compare(fleet, helm=helm_settings, ignore=chart_objects, what="disruptive upgrade")
    decided = release(upgrade)
    assert decided["verdict"] == "hold" and decided.get("verb") == "helm-upgrade", decided

    # No GPUOperator any more: the uninstall pulls the driver from under the pod, held as disruptive.
    op_repo.values, op_repo.version = values, None
    uninstall = compare(fleet, helm=helm_settings, prune=True, ignore=chart_objects, what="uninstall, policy wait")
    decided = release(uninstall)
    assert decided["verdict"] == "hold" and decided.get("verb") == "helm-uninstall", decided

    # The same under a closed maintenance window: held for the window.
    op_repo.cluster_spec = {"maintenance": closed_window()}
    windowed = compare(fleet, helm=helm_settings, prune=True, ignore=chart_objects, what="uninstall, closed window")
    decided = release(windowed)
    assert decided["verdict"] == "hold" and decided.get("verb") == "helm-uninstall", decided
    [entry] = [e for e in windowed.apply.entries if e.ref.kind == "HelmRelease"]
    assert entry.waiting is not None and entry.waiting.on == "window", entry.reason
