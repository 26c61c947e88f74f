"""Policy: what a fleet repository may contain, as findings with rule ids.

``check(revision, clusters=..., compiler=...)`` returns every finding of a
revision — the loader's, the structural rules', and per cluster (after its
overlays) the tenancy, operator and CEL rules' — sorted by file and line.
Rules (ids as printed by ``fleetctl validate``; docs/validate.md explains
each):

========================  ==================================================
structure                 duplicate-object, dns-label, team-folder,
                          team-kind, team-cluster-scoped,
                          deviceclass-location, claim-location,
                          unsupported-kind, fleet-root, cluster-reference
per cluster               team-namespace, team-device-class,
                          unknown-device-class, team-quota, operator-values,
                          cel-too-long, cel (compile, via ``compiler``),
                          cel-removed-attribute,
                          overlay-target, overlay-patch
loading (fleet.manifests) yaml-syntax, yaml-duplicate-key, yaml-encoding,
                          yaml-limit, yaml-ambiguous, file-too-large,
                          path-escape, unknown-kind, deprecated-api, schema
========================  ==================================================

Pure: it sits above ``fleet.manifests``, ``fleet.cel`` and
``fleet.inventory`` and below the engine; no I/O.
"""

from __future__ import annotations

from fleet.manifests import Finding, Location, Severity, has_errors
from fleet.policy.checks import check, view_findings
from fleet.policy.selectors import MAX_EXPRESSION_BYTES, Compiler, Problem, dra_compiler, locate

__all__ = [
    "MAX_EXPRESSION_BYTES",
    "Compiler",
    "Finding",
    "Location",
    "Problem",
    "Severity",
    "check",
    "dra_compiler",
    "has_errors",
    "locate",
    "view_findings",
]
