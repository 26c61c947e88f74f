"""fleet: a GitOps controller for Kubernetes GPU fleets that use Dynamic Resource Allocation.

The package is layered (enforced by import-linter, see pyproject.toml):

    fleetctl (CLI)
      > fleet.controller | fleet.sandbox
        > fleet.engine            plan, diff, apply, health, prune
          > fleet.manifests | fleet.policy | fleet.cel | fleet.inventory   (pure)
            > fleet.kube | fleet.source | fleet.helm | fleet.telemetry     (adapters)

``fleet.errors`` is shared by every layer: the user-facing error type.
"""
