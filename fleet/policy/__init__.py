"""Policy: what a fleet repository may contain, as findings with rule ids.

``check(revision, clusters=..., compiler=...)`` returns every finding of a
revision — the loader's, the structural rules', and per cluster (after its
overlays) the tenancy, operator and CEL rules' — sorted by file and line.
``validate(revision, clusters=..., inventories={cluster: Inventory})`` adds
satisfiability on each cluster's devices (``fleet.inventory``): findings at
the claim's line, and per claim the nodes/devices that can satisfy it.
Rules (ids as printed by ``fleetctl validate``; docs/validate.md explains
each):

========================  ==================================================
structure                 duplicate-object, dns-label, team-folder,
                          team-kind, team-cluster-scoped,
                          deviceclass-location, claim-location,
                          adopt-annotation, take-ownership-annotation,
                          drift-annotation, team-owners (a warning),
                          unsupported-kind, fleet-root, cluster-reference,
                          maintenance-location, maintenance-pool
per cluster               team-namespace, reserved-namespace,
                          team-device-class, unknown-device-class,
                          team-quota, team-admin-access, operator-values,
                          pool-overlap, quantity, cluster-version,
                          cel-too-long, cel (compile, via ``compiler``),
                          cel-removed-attribute, cel-attribute-type,
                          overlay-target, overlay-patch,
                          maintenance-api, maintenance-direct
with an inventory         claim-unsatisfiable, cel-unknown-attribute,
                          cel-runtime-error (from ``fleet.inventory``),
                          maintenance-devices, maintenance-full-pool,
                          maintenance-overlap (``fleet.policy.maintenances``)
loading (fleet.manifests) yaml-syntax, yaml-duplicate-key, yaml-encoding,
                          yaml-limit, yaml-ambiguous, file-too-large,
                          path-escape, unknown-kind, deprecated-api, schema
========================  ==================================================

Pure: it sits above ``fleet.manifests``, ``fleet.cel`` and
``fleet.inventory`` and below the engine; no I/O.
"""

from __future__ import annotations

from fleet.manifests import Finding, Location, Severity, has_errors
from fleet.policy.checks import Result, check, validate, view_findings
from fleet.policy.satisfiability import Satisfaction
from fleet.policy.selectors import MAX_EXPRESSION_BYTES, Compiler, Problem, dra_compiler, locate

__all__ = [
    "MAX_EXPRESSION_BYTES",
    "Compiler",
    "Finding",
    "Location",
    "Problem",
    "Result",
    "Satisfaction",
    "Severity",
    "check",
    "dra_compiler",
    "has_errors",
    "locate",
    "validate",
    "view_findings",
]
