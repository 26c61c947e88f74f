"""Team objects are written as the team: the API server's RBAC bounds a pull request too.

``fleetctl validate`` refuses the hostile changes fleet knows of, but it is fleet's own code: an
object it misses (a new kind, a namespace typo, a check someone turned off) would otherwise be
written with the controller's cluster-wide rights. So every request that writes, dry-runs or prunes an
object declared in a team's directory (``Desired.team``) carries ``Impersonate-User:
system:serviceaccount:<first namespace>:fleet-team`` (``SERVICE_ACCOUNT``): the ServiceAccount
the tenancy stage renders for the team, a subject of the team's RoleBindings and of nothing else.
The API server then grants exactly what the team Role grants, in the team's namespaces. Reads
(listings, health gates), the ledger and the platform's objects keep the controller's identity.
Flux's ``spec.serviceAccountName`` and Argo CD's sync impersonation work the same way
(docs/security.md).

The identity follows the file, not the kind: whatever a team's folder declares (a template, a
DeviceClass, a GPUNodePool's Node writes, what a team's Overlay patched) is written as the team,
and a GPUOperator there is refused outright (``Sync`` says so before any write); a pruned object is
deleted as the team whose folder declared it (``origin``, from its ``source`` annotation). Only the
objects a Team's own ``team.yaml`` renders (its Namespaces, Role, RoleBinding, ServiceAccount,
quota) are the platform's.

A refusal must leave the revision unwritten, not half applied. New objects are not dry-run before
an apply (``fleet.engine.diffs``), and a stage writes its objects concurrently, so ``refusals``
asks first: one impersonated dry-run apply per team, namespace and kind (the team Role names no
object, so RBAC decides by exactly those), before the first write of the run for teams whose ServiceAccount exists,
and at the start of the team's stage for a team this run creates (its ServiceAccount and
RoleBindings come from the tenancy stage). A 403 refuses every object of that group: each entry
names the file:line that declares it and the API server's words.

``Mode`` is ``--team-impersonation``: ``required`` (the overlays' default) refuses to write the
objects of a team without a ServiceAccount (neither live nor in the plan); ``optional`` writes them
as the controller instead; ``off`` never impersonates. A diff of a team whose ServiceAccount this
run would create cannot be previewed as the team (the API server knows no such binding yet): its
objects are dry-run as the controller, and the entry says so. So are the objects of a namespace
whose team rights this run restores (``Identities.restoring``: someone deleted or changed the team's
RoleBinding, Role or ServiceAccount): a 403 asked before the tenancy stage would only say the rights
are missing, and refuse the very revision that puts them back. Their refusal check waits for the
start of their own stage, after the tenancy stage: a real escalation is still refused there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from fleet.engine import normalizations, ownership, plans, workers
from fleet.engine.changesets import Change
from fleet.kube import Client, Forbidden, KubeError, Ref

Mode = Literal["required", "optional", "off"]
MODES: tuple[str, ...] = get_args(Mode)
SERVICE_ACCOUNT = "fleet-team"
"""The name of every team's ServiceAccount: the controller's ClusterRole may impersonate this name only."""
TEAM_ROLE = "fleet-team-claims"
"""The name of the Role and RoleBinding the tenancy stage renders in each team namespace."""


def user(namespace: str) -> str:
    """The username the API server gives the team ServiceAccount in ``namespace``."""
    return f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}"


def account(namespace: str) -> Ref:
    return Ref("v1", "ServiceAccount", namespace, SERVICE_ACCOUNT)


@dataclass(frozen=True)
class Identities:
    """As whom each team's objects are written, decided once per run from the plan and the live cluster."""

    mode: Mode = "off"
    users: Mapping[str, str] = field(default_factory=dict)
    """Team → the user its objects are written as; a team not here is written as the controller."""
    pending: frozenset[str] = frozenset()
    """Teams whose ServiceAccount the plan declares but the cluster does not hold yet."""
    missing: Mapping[str, Ref] = field(default_factory=dict)
    """Teams with objects and no ServiceAccount (neither live nor planned) → the one they lack."""
    restoring: frozenset[tuple[str, str]] = frozenset()
    """(team, namespace) whose rights this run's tenancy stage restores: the team's Role or RoleBinding
    there, or its ServiceAccount, is missing or differs from the plan."""

    def deferred(self, team: str, namespace: str) -> bool:
        """Whether the team's rights in ``namespace`` exist only after this run's tenancy stage: its
        objects there are previewed as fleet and asked about at the start of their own stage."""
        return bool(team) and (team in self.pending or (team, namespace) in self.restoring)


def resolve(*, plan: plans.Plan, live: Mapping[str, dict[str, Any]], mode: Mode) -> Identities:
    """Each team's identity under ``mode``: its ServiceAccount in its first namespace, live or planned.

    Teams no longer in the plan (their objects are pruned) are found by the live ServiceAccount
    fleet made for them on this cluster (its team label)."""
    if mode == "off":
        return Identities(mode=mode)
    planned = {d.ref.key for d in plan.objects if d.ref.kind == "ServiceAccount"}
    users: dict[str, str] = {}
    pending: set[str] = set()
    missing: dict[str, Ref] = {}
    for obj in live.values():
        meta = obj.get("metadata") or {}
        if obj.get("kind") != "ServiceAccount" or meta.get("name") != SERVICE_ACCOUNT:
            continue
        team = (meta.get("labels") or {}).get(ownership.TEAM_LABEL)
        if team and ownership.marked_for(obj, cluster=plan.cluster):  # fleet's own, never a look-alike
            users[team] = user(meta["namespace"])
    teams = {d.team for d in plan.objects if d.team}
    for team, namespaces in plan.teams.items():
        ref = account(namespaces[0]) if namespaces else None
        if ref is not None and ref.key in live:
            users[team] = user(ref.namespace)
        elif ref is not None and ref.key in planned:
            users[team] = user(ref.namespace)
            pending.add(team)
        elif team in teams:
            users.pop(team, None)
            missing[team] = ref or account("")
    return Identities(
        mode=mode,
        users=users,
        pending=frozenset(pending),
        missing=missing,
        restoring=restored(plan=plan, live=live, teams=set(users) - pending),
    )


def restored(
    *, plan: plans.Plan, live: Mapping[str, dict[str, Any]], teams: Iterable[str]
) -> frozenset[tuple[str, str]]:
    """(team, namespace) of ``teams`` whose rights the plan's tenancy objects restore: in a namespace, its
    Role or RoleBinding (``renders.TEAM_ROLE``) missing or not as the plan declares it; in every
    namespace of the team, its ServiceAccount so."""
    declared = {d.ref.key: d for d in plan.objects}
    out: set[tuple[str, str]] = set()
    for team in teams:
        namespaces = plan.teams.get(team, ())
        if not namespaces:
            continue
        keys = [account(namespaces[0]).key]
        whole = any(_differs(declared.get(k), live.get(k)) for k in keys)
        for ns in namespaces:
            rights = [Ref("rbac.authorization.k8s.io/v1", kind, ns, TEAM_ROLE).key for kind in ("Role", "RoleBinding")]
            if whole or any(_differs(declared.get(k), live.get(k)) for k in rights):
                out.add((team, ns))
    return frozenset(out)


def _differs(d: plans.Desired | None, live: Mapping[str, Any] | None) -> bool:
    """A declared object this run writes: missing live, or live with other content than the plan's."""
    if d is None:
        return False
    return live is None or normalizations.annotation(dict(live), ownership.APPLIED) != d.applied


def origin(obj: Mapping[str, Any]) -> str:
    """The Team whose folder declared a live object fleet wrote ("" for the platform's): its team label,
    unless its ``source`` is the Team's own ``team.yaml`` (the tenancy the platform writes for it)."""
    meta = obj.get("metadata") or {}
    team = str((meta.get("labels") or {}).get(ownership.TEAM_LABEL, ""))
    source = str((meta.get("annotations") or {}).get(ownership.SOURCE, ""))
    parts = source.split(":", 1)[0].split("/")
    if not team or (len(parts) == 3 and parts[0] == "teams" and parts[2] == "team.yaml"):
        return ""
    return team


@dataclass(frozen=True, slots=True)
class Identity:
    """As whom one object of a team goes: the one rule the dry-run, the write, the prune and the refusal
    check all read (``identity``)."""

    user: str = ""
    """The user the write (and its decision) impersonates ("": the controller's own identity)."""
    dry_run: str = ""
    """The user the dry-run that builds the proposal impersonates: fleet where this run's tenancy stage
    creates or restores the team's rights first (``note`` says so)."""
    as_fleet: str = ""
    """Why a team's object goes as fleet (``--team-impersonation=optional``, no ServiceAccount)."""
    note: str = ""
    """Why the dry-run went as fleet although the write goes as the team."""
    refusal: str = ""
    """Why the object may not be written at all (``required``, and the team has no ServiceAccount)."""


FLEET = Identity()
DRY_RUN_AS_FLEET = "dry-run as fleet: "
"""How ``Identity.note`` starts: the CLI says each such note once (``fleetctl.reports``)."""


def identity(identities: Identities, team: str, namespace: str = "") -> Identity:
    """As whom an object of ``team`` (``""``: the platform's) in ``namespace`` is dry-run and written."""
    if not team or identities.mode == "off":
        return FLEET
    name = identities.users.get(team, "")
    if name:
        if not identities.deferred(team, namespace):
            return Identity(user=name, dry_run=name)
        if team in identities.pending:
            note = f"{DRY_RUN_AS_FLEET}team {team!r}'s ServiceAccount is created by this apply's tenancy stage"
        else:
            note = (
                f"{DRY_RUN_AS_FLEET}team {team!r}'s rights in {namespace} are restored by this apply's "
                "tenancy stage; the apply writes it as the team after that stage"
            )
        return Identity(user=name, note=note)
    if identities.mode == "required":
        ref = identities.missing.get(team) or account("")
        return Identity(
            refusal=f"team {team!r} has no ServiceAccount {ref.namespace}/{ref.name}: --team-impersonation=required "
            "writes a team's objects only as the team"
        )
    return Identity(as_fleet=f"written as fleet: team {team!r} has no ServiceAccount (--team-impersonation=optional)")


def unaccounted(identities: Identities, *, desired: Iterable[plans.Desired]) -> list[Change]:
    """Under ``required``, a refused Change for every object of a team without a ServiceAccount."""
    if identities.mode != "required" or not identities.missing:
        return []  # nobody is refused: no identity to work out for each of 10,000 objects
    out: list[Change] = []
    for d in desired:
        why = identity(identities, d.team, d.ref.namespace).refusal
        if why:
            out.append(
                Change.refusal(
                    d.ref,
                    stage=d.stage.name,
                    error=(
                        f"declared at {d.source} by {why}. fleet applies nothing while this stands.\n  hint: let "
                        "the tenancy stage create it (the Team needs a namespace), or run with "
                        "--team-impersonation=optional"
                    ),
                )
            )
    return out


async def refusals(
    *, client: Client, identities: Identities, desired: Iterable[plans.Desired], concurrency: int = 16
) -> list[Change]:
    """A refused Change for every team object whose team may not write it, asked before any write.

    One impersonated dry-run apply per (team, namespace, kind): RBAC decides by verb, resource and
    namespace, so one answer holds for the group. Only a 403 refuses: anything else (a namespace
    the run creates, an invalid object) is the diff's and the apply's to report per object."""
    groups: dict[tuple[str, str, str, str], list[plans.Desired]] = {}
    for d in desired:
        name = identity(identities, d.team, d.ref.namespace).user
        if name:
            groups.setdefault((name, d.ref.namespace, d.ref.api_version, d.ref.kind), []).append(d)
    keys = sorted(groups)
    answers: dict[tuple[str, str, str, str], Forbidden] = {}

    async def ask(key: tuple[str, str, str, str]) -> None:
        first = groups[key][0]
        try:
            await client.impersonating(key[0]).apply(
                first.obj, field_manager=first.field_manager, dry_run=True, force=True
            )
        except Forbidden as err:
            answers[key] = err
        except KubeError:
            pass

    await workers.for_each(keys, ask, concurrency=concurrency)
    return [refused(d, user=key[0], err=answers[key]) for key in keys if key in answers for d in groups[key]]


def refused(d: plans.Desired, *, user: str, err: KubeError) -> Change:
    """The entry of a team object the API server refused to ``user``: where it is declared, and why."""
    if "cannot impersonate" in err.what:  # the applier's own rights, not the team's
        return Change.refusal(
            d.ref,
            stage=d.stage.name,
            error=(
                f"declared at {d.source}: fleet may not act as team {d.team!r} ({user}): {err.what}.\n  hint: "
                f"grant the applier impersonate on serviceaccounts named {SERVICE_ACCOUNT} "
                "(overlays/base/clusterrole.yaml), or pass --team-impersonation=off"
            ),
        )
    return Change.refusal(
        d.ref,
        stage=d.stage.name,
        error=(
            f"declared at {d.source}: the API server refuses it to team {d.team!r} (as {user}): {err.what}. "
            "fleet writes nothing of this revision while this stands.\n  hint: a team directory holds "
            "ResourceClaimTemplates and ResourceClaims in the team's own namespaces; fix the file, or "
            "ask the platform team to widen the Team"
        ),
    )


__all__ = [
    "DRY_RUN_AS_FLEET",
    "FLEET",
    "MODES",
    "SERVICE_ACCOUNT",
    "TEAM_ROLE",
    "Identities",
    "Identity",
    "Mode",
    "account",
    "identity",
    "origin",
    "refusals",
    "refused",
    "resolve",
    "restored",
    "unaccounted",
    "user",
]
