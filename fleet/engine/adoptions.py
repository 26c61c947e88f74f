"""Which existing objects fleet may take over, decided before anything is written.

An object the plan declares may already exist when fleet first wants it: a
namespace made by hand before the team moved to fleet, a template a notebook tool
created. Taking it over silently would make fleet its owner, and pruning would
later delete it with whatever it holds. So an object that exists, is not in the
ledger and is not marked for this cluster is a conflict, unless the repository
says to adopt it (``Desired.adopt``). Conflicts are found for the whole plan at
the start of a run, so a refused apply writes nothing at all; ``diff`` lists them.

Two live pools picking the same Node is refused the same way: validation only
sees selectors nested in each other, the live labels decide the rest.

Every object gets an origin for the ledger: ``created`` when it did not exist, else
``adopted`` (pruning then releases it and never deletes it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleet.engine import ledgers, ownership, plans
from fleet.engine.changesets import Change
from fleet.kube import Ref


def conflicts(
    *,
    desired: Iterable[plans.Desired],
    live: Mapping[str, dict[str, Any]],
    ledger: Mapping[str, ledgers.Entry],
    cluster: str,
    handover: Mapping[str, ledgers.Origin] | None = None,
) -> list[Change]:
    """A failed Change for every desired object that exists, is not fleet's, and may not be adopted
    (``handover``: objects ``fleetctl import`` hands to fleet, taken over like adopted ones)."""
    out: list[Change] = []
    handed = handover or {}
    for d in desired:
        current = live.get(d.ref.key)
        if (
            current is None
            or d.ref.key in ledger
            or d.adopt
            or d.ref.key in handed
            or ownership.marked_for(current, cluster=cluster)
        ):
            continue
        owners = ownership.owners(current)
        by = f"managed by {', '.join(owners)}" if owners else "no manager recorded"
        out.append(
            Change.refusal(
                d.ref,
                stage=d.stage.name,
                error=(
                    f"already exists in cluster {cluster} and fleet did not create it ({by}); "
                    f"declared at {d.source}. fleet applies nothing while this stands.\n  hint: {_hint(d)}"
                ),
            )
        )
    return out


def _hint(d: plans.Desired) -> str:
    file = d.source.split(":", 1)[0]
    if d.ref.kind == "Namespace":
        return (
            f"to let fleet manage it, set spec.adoptNamespaces: true (or [{d.ref.name}]) in {file}; "
            "fleet will then release it, never delete it; or choose a namespace that does not exist"
        )
    return (
        f'to let fleet manage it, annotate it {ownership.ADOPT}: "{ownership.ADOPT_VALUE}" in {file}; '
        "fleet will then release it, never delete it; or rename it"
    )


def overlaps(*, pools: tuple[plans.PoolRule, ...], nodes: list[dict[str, Any]]) -> list[Change]:
    """A failed Change for every live Node that two or more pools select."""
    return [
        Change.refusal(
            Ref("v1", "Node", "", found.node),
            stage="pools",
            error=f"{found.describe()}\n  hint: make the pools' nodeSelectors disjoint (a label only one pool's "
            "nodes carry), or relabel the node",
        )
        for found in plans.overlaps(pools, nodes=nodes)
    ]


def origin(
    key: str,
    *,
    ledger: Mapping[str, ledgers.Entry],
    live_before: Mapping[str, Any],
    handover: Mapping[str, ledgers.Origin] | None = None,
) -> ledgers.Origin:
    """The ledger's origin for ``key``: as recorded, else as ``fleetctl import`` handed it over, else
    adopted if it existed before this run, else created. A GPUMaintenance's DeviceTaintRule is always
    its own, whoever made it first: removing the file deletes it, so the devices return."""
    if key in ledger:
        return ledger[key].origin
    if key.split("/", 2)[1:2] == ["DeviceTaintRule"]:
        return "created"
    if handover and key in handover and key in live_before:
        return handover[key]
    return "adopted" if key in live_before else "created"


__all__ = ["conflicts", "origin", "overlaps"]
