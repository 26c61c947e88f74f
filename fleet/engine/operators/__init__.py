"""The operator stage: the GPU Operator Helm release, with the DRA guide's checks done for the operator.

The guide installs the GPU Operator by hand (``helm upgrade --install gpu-operator
nvidia/gpu-operator --version=v26.7.0 --set clusterPolicy.deployCR=false --set
gpuCluster.deployCR=true ...``), then waits for ``GPUCluster gpu-cluster``, checks the
DeviceClasses and the ResourceSlices, and on removal deletes GPU workloads and claims
first. The stage does each step, one module per step, as the engine's other verbs are cut:

- ``releases``: what is observed (reads only): the release (``helm list``), its user values,
  every other release, objects of kinds that may not be served yet. A release whose chart
  version and values equal the declared ones is ``unchanged``: no Helm write, no API write.
- ``guards``: each refusal names the reason and the fix, after the preflight
  (``fleet.engine.preflights``): a ClusterPolicy beside the GPUCluster path; both ``deployCR``
  values true; a separate ``dra-driver-nvidia-gpu`` release, or a CRD of the chart owned by
  another release; a downgrade or a major upgrade without ``spec.upgrade.allowDowngrade|allowMajor``;
  a downgrade or removal while ResourceClaims hold the driver's devices.
- ``crds``: the chart's CRDs first (helm never upgrades ``crds/``), server-side-applied and
  Established; a CRD that drops a field stored objects use is refused.
- ``upgrades``: ``helm upgrade --install`` with exactly the declared values, the remedy
  when it fails (``spec.remediation``), and releases left ``pending-*`` recovered.
- ``renders``: the chart rendered and dry-run applied object by object, for ``diff``
  (and without a cluster, for ``fleetctl render`` and ``validate --charts``);
  ``capabilities``: the API versions and Kubernetes version every render sees.
- ``gates``: the readiness gate (``Gate.OPERATOR_READY``, woken by watches).
- ``removals``: uninstall a release fleet installed, once no claim holds a GPU.
- ``runs``: ``Stage``, which orders the steps for one plan.

Each GPU node's driver-upgrade state (the operator's ``nvidia.com/gpu-driver-upgrade-state``
label, ``fleet.engine.drivers``) is carried on the release entry as data (``Change.operator``,
with the chart version deployed) and printed as its reason, during and after an upgrade, by
diff, apply and the controller's FleetSync status alike.
"""

from __future__ import annotations

from fleet.engine.drivers import UPGRADE_STATE, DriverState, driver_states, label_since, states_text
from fleet.engine.operators.crds import dropped_fields, uses
from fleet.engine.operators.gates import ready_problems, wait_ready
from fleet.engine.operators.guards import (
    allocated_claims,
    crd_owner_problems,
    dra_release_problem,
    parse_version,
    pool_node_blocked,
    values_problem,
    version_problem,
)
from fleet.engine.operators.noops import Noops
from fleet.engine.operators.releases import OperatorRefused, release_ref, visible_releases
from fleet.engine.operators.renders import ChartRefused
from fleet.engine.operators.runs import Stage

__all__ = [
    "UPGRADE_STATE",
    "ChartRefused",
    "DriverState",
    "Noops",
    "OperatorRefused",
    "Stage",
    "allocated_claims",
    "crd_owner_problems",
    "dra_release_problem",
    "driver_states",
    "dropped_fields",
    "label_since",
    "parse_version",
    "pool_node_blocked",
    "ready_problems",
    "release_ref",
    "states_text",
    "uses",
    "values_problem",
    "version_problem",
    "visible_releases",
    "wait_ready",
]
