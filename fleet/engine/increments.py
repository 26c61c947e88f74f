"""A commit's validation and plan, made from the last one's: work in proportion to what it changed.

The controller checks a revision on every commit, and a commit almost always changes a
few of a team's claims among thousands. Checking and planning the whole revision again
would cost the same for a one-line commit as for the first load. So the last check is
kept (``Increments``) and the next is made from it by redoing only what the changed files
can reach.

What a file can reach decides how. Files are split into:

- **units**: a file under ``teams/<team>/`` that holds nothing but ResourceClaimTemplates
  and ResourceClaims (or nothing loadable at all: a broken file's findings are its own).
  Its unit is the team folder. A claim's findings depend on the claim, the fleet-wide
  files and the other claims of its folder (the team's quota sums them), nothing else;
  so do the findings located in the team's folder.
- **fleet-wide**: every other file (``fleet.yaml``, Clusters, DeviceClasses, pools,
  overlays, the operator, a Team's own file). A change to one reaches anything, so the
  whole revision is checked and planned again (``full``).

A commit that changes only unit files re-validates one sub-revision, the fleet-wide
files plus every file of the changed units, and takes its findings located in those
units' folders; the findings of the other units and those outside every team folder are
the last check's. Its plan is the sub-revision's (teams, classes, pools, the changed
units' claims, all rendered for the new revision) plus the other units' claims of the
last plan, carried over with the new revision (``renders.carried``).

Claims meet claims of other folders in one place only, a duplicate identity (its finding
may be located in either folder); a change that touches an identity held twice (before
or after it), or a folder holding one, is checked fully. So is a
revision whose overlays patch claims, or one where claims produce findings outside their
folder (a DeviceClass's CEL failing on a claim: ``orphans``). Every other commit is
incremental, and ``tests/engine/test_increments.py`` holds its result equal to a full
check's on many random commit sequences.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fleet.engine import plans, renders
from fleet.errors import FleetError
from fleet.manifests import kinds
from fleet.manifests.caches import ParseCache, Parsed
from fleet.manifests.findings import Finding
from fleet.manifests.limits import Limits
from fleet.manifests.revisions import Manifest, Revision, check_path, load_file
from fleet.manifests.views import resolve
from fleet.policy import validate
from fleet.telemetry import tracing

CLAIM_KINDS = ("ResourceClaimTemplate", "ResourceClaim")


def folder_of(file: str) -> str | None:
    """``teams/<team>/...`` → ``<team>`` (a file's or a finding's team folder); None elsewhere."""
    parts = file.split("/", 2)
    return parts[1] if len(parts) == 3 and parts[0] == "teams" else None


def unit_of(file: str, parsed: Parsed) -> str | None:
    """The team folder of a file that holds claims only; None for a fleet-wide file."""
    folder = folder_of(file)
    if folder is None or any(m.kind not in CLAIM_KINDS for m in parsed[0]):
        return None
    return folder


@dataclass(frozen=True)
class Outcome:
    """A check's answer: the error findings (sorted) and, when there are none, the plan."""

    findings: tuple[Finding, ...]
    plan: plans.Plan | None


@dataclass
class Increments:
    """What the last check of one repository for one cluster left, for the next one.

    Bounded by construction: every map is keyed by the current files, units or identities
    and replaced or updated in place on each check, so it holds one revision's worth.
    """

    cluster: str = ""
    revision: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    parsed: dict[str, Parsed] = field(default_factory=dict)
    wide: list[str] = field(default_factory=list)
    """The fleet-wide files, sorted."""
    units: dict[str, set[str]] = field(default_factory=dict)
    """Team folder → its unit files."""
    errors: dict[str | None, tuple[Finding, ...]] = field(default_factory=dict)
    """Error findings by the team folder they are located in (None: outside every team folder)."""
    identities: Counter[int] = field(default_factory=Counter)
    """How many manifests hold each identity, by its hash: two identities of one hash only make
    a check full that need not be."""
    claims: dict[str, tuple[plans.Desired, ...]] = field(default_factory=dict)
    """Team folder → the rendered claims of its unit files in ``plan``."""
    plan: plans.Plan | None = None
    outcome: Outcome | None = None
    incremental: bool = False
    """The last check can be built on (no orphans, no overlay patching claims)."""
    full_checks: int = 0
    partial_checks: int = 0

    def __len__(self) -> int:
        return len(self.files)

    def check(
        self, files: Mapping[str, bytes], *, cluster: str, revision: str, read: tuple[Finding, ...], cache: ParseCache
    ) -> Outcome:
        """Validate and plan ``files`` for ``cluster`` at ``revision``; FleetError as ``validate``/``plan`` raise.

        ``read``: the findings of reading the tree (any makes the check full)."""
        if read or not self.incremental or cluster != self.cluster:
            return self._full(files, cluster=cluster, revision=revision, read=read, cache=cache)
        changed = [p for p, content in files.items() if self.files.get(p) is not content]
        changed = [p for p in changed if self.files.get(p) != files[p]]
        added = sum(1 for p in changed if p not in self.files)
        if len(files) - added != len(self.files):  # some went
            changed += [p for p in self.files if p not in files]
        if not changed and self.outcome is not None and (revision == self.revision or self.outcome.plan is None):
            return self.outcome  # the same files (findings do not depend on the revision)
        fresh: dict[str, Parsed] = {}
        touched: set[str] = set()
        for path in changed:
            old = self.parsed.get(path)
            if old is not None and unit_of(path, old) is None:
                return self._full(files, cluster=cluster, revision=revision, read=read, cache=cache)
            if path in files:
                fresh[path] = _parse(path, files[path], cache=cache)
                unit = unit_of(path, fresh[path])
                if unit is None:
                    return self._full(files, cluster=cluster, revision=revision, read=read, cache=cache)
                touched.add(unit)
            else:
                touched.add(folder_of(path) or "")
        if not self._identities_alone(changed, fresh):
            return self._full(files, cluster=cluster, revision=revision, read=read, cache=cache)
        return self._partial(files, changed=changed, fresh=fresh, touched=touched, revision=revision, cache=cache)

    # -- a full check -------------------------------------------------------------------------

    def _full(
        self,
        files: Mapping[str, bytes],
        *,
        cluster: str,
        revision: str,
        read: tuple[Finding, ...],
        cache: ParseCache,
    ) -> Outcome:
        self.full_checks += 1
        self.incremental = False
        parsed: dict[str, Parsed] = {}
        for path in sorted(files):
            parsed[path] = _parse(path, files[path], cache=cache)
        cache.sweep()
        whole = _revision(parsed, sorted(parsed), read=read)
        found = _errors(validate(whole, clusters=[cluster]).findings)
        plan = None
        if not found:
            plan = _render(whole, cluster=cluster, revision_id=revision)
        outcome = Outcome(findings=found, plan=plan)
        self.cluster, self.revision, self.files, self.parsed = cluster, revision, dict(files), parsed
        self.plan, self.outcome = plan, outcome
        if read:
            return outcome
        wide = [p for p in sorted(parsed) if unit_of(p, parsed[p]) is None]
        units: dict[str, set[str]] = {}
        for path, result in parsed.items():
            unit = unit_of(path, result)
            if unit is not None:
                units.setdefault(unit, set()).add(path)
        self.wide, self.units = wide, units
        self.errors = _by_folder(found)
        self.identities = Counter(hash(m.identity) for result in parsed.values() for m in result[0])
        self.claims = _claims_by_unit(plan, units=units) if plan is not None else {}
        self.incremental = self._buildable(whole, cluster=cluster)
        return outcome

    def _buildable(self, whole: Revision, *, cluster: str) -> bool:
        """Whether the next check may be made from this one: no overlay patches a claim, and the
        fleet-wide files alone give the findings outside every team folder that all files give."""
        for manifest in whole.manifests:
            if manifest.kind != "Overlay":
                continue
            model = manifest.model
            if not isinstance(model, kinds.Overlay) or any(p.target.kind in CLAIM_KINDS for p in model.spec.patches):
                return False
        try:
            alone = _errors(validate(_revision(self.parsed, self.wide), clusters=[cluster]).findings)
        except FleetError:
            return False
        outside = tuple(f for f in alone if folder_of(f.location.file) is None)
        return outside == self.errors.get(None, ())

    # -- a partial check ----------------------------------------------------------------------

    def _identities_alone(self, changed: Iterable[str], fresh: Mapping[str, Parsed]) -> bool:
        """Apply the changed files to the identity counts; False (counts untouched) when an
        identity they hold is held by another manifest, before or after the change."""
        old: Counter[int] = Counter()
        new: Counter[int] = Counter()
        for path in changed:
            before = self.parsed.get(path)
            old.update(hash(m.identity) for m in (before[0] if before is not None else ()))
            new.update(hash(m.identity) for m in (fresh[path][0] if path in fresh else ()))
        for identity in old.keys() | new.keys():
            others = self.identities.get(identity, 0) - old[identity]
            if others or old[identity] > 1 or new[identity] > 1:
                return False
        for identity in old.keys() | new.keys():
            if new[identity]:
                self.identities[identity] = new[identity]
            else:
                self.identities.pop(identity, None)
        return True

    def _partial(
        self,
        files: Mapping[str, bytes],
        *,
        changed: list[str],
        fresh: dict[str, Parsed],
        touched: set[str],
        revision: str,
        cache: ParseCache,
    ) -> Outcome:
        self.partial_checks += 1
        self.incremental = False  # until this check is whole: an exception leaves the next one full
        self.revision = revision
        for path in changed:
            if path in self.files:  # its old entry goes now: the cache holds one per file
                cache.forget(ParseCache.key(path, self.files[path], LIMITS))
            self.parsed.pop(path, None)
            unit = folder_of(path) or ""
            self.units.get(unit, set()).discard(path)
            if path in fresh:
                self.parsed[path] = fresh[path]
                self.units.setdefault(unit, set()).add(path)
        for unit in [u for u in touched if not self.units.get(u)]:
            self.units.pop(unit, None)
        self.files = dict(files)
        mine = [p for u in touched for p in self.units.get(u, ())]
        if any(self.identities[hash(m.identity)] > 1 for p in mine for m in self.parsed[p][0]):
            # a duplicate across folders: its finding is located in either of them
            return self._full(files, cluster=self.cluster, revision=revision, read=(), cache=cache)
        paths = sorted([*self.wide, *mine])
        sub = _revision(self.parsed, paths)
        found = _errors(validate(sub, clusters=[self.cluster]).findings)
        for manifest in sub.manifests:
            manifest.positions.release()  # what the findings made again (``ParseCache.release``)
        located = _by_folder(found)
        if located.get(None, ()) != self.errors.get(None, ()):
            # claims made findings outside their folder: build everything again
            return self._full(files, cluster=self.cluster, revision=revision, read=(), cache=cache)
        for unit in touched:
            if located.get(unit):
                self.errors[unit] = located[unit]
            else:
                self.errors.pop(unit, None)
        errors = tuple(sorted(f for found_here in self.errors.values() for f in found_here))
        if errors:
            self.plan, self.claims = None, {}
            self.outcome = Outcome(findings=errors, plan=None)
            self.incremental = True
            return self.outcome
        if self.plan is None:
            whole = _revision(self.parsed, sorted(self.parsed))
            plan = _render(whole, cluster=self.cluster, revision_id=revision)
            self.claims = _claims_by_unit(plan, units=self.units)
        else:
            made = _render(sub, cluster=self.cluster, revision_id=revision)
            rendered = _claims_by_unit(made, units={u: self.units[u] for u in touched if u in self.units})
            objects = list(made.objects)  # the teams, classes, pools and the touched units' claims
            for unit, claims in list(self.claims.items()):
                if unit in touched:
                    continue
                claims = self.claims[unit] = tuple(renders.carried(d, revision=revision) for d in claims)
                objects.extend(claims)
            for unit in touched:
                if rendered.get(unit):
                    self.claims[unit] = rendered[unit]
                else:
                    self.claims.pop(unit, None)
            plan = dataclasses.replace(made, objects=renders.ordered(objects))
        self.plan = plan
        self.outcome = Outcome(findings=(), plan=plan)
        self.incremental = True
        return self.outcome


LIMITS = Limits()


def _parse(path: str, content: bytes, *, cache: ParseCache) -> Parsed:
    problem = check_path(path)
    if problem is not None:
        return ((), (problem,))
    key = ParseCache.key(path, content, LIMITS)
    parsed = cache.get(key)
    if parsed is None:
        parsed = load_file(file=path, content=content, limits=LIMITS)
        renders.share(parsed[0])  # kept for as long as the file is unchanged
        cache.put(key, parsed)
    return parsed


def _render(revision: Revision, *, cluster: str, revision_id: str) -> plans.Plan:
    attributes = {tracing.CLUSTER: cluster, tracing.REVISION: revision_id}
    with tracing.tracer().start_as_current_span("render", attributes=attributes):
        return renders.plan(resolve(revision, cluster=cluster), revision=revision_id)


def _revision(parsed: Mapping[str, Parsed], paths: Iterable[str], *, read: tuple[Finding, ...] = ()) -> Revision:
    """The Revision ``load_revision`` makes of ``paths`` (in sorted order)."""
    manifests: list[Manifest] = []
    found: list[Finding] = list(read)
    for path in paths:
        manifests.extend(parsed[path][0])
        found.extend(parsed[path][1])
    return Revision(manifests=tuple(manifests), findings=tuple(found))


def _errors(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    return tuple(f for f in findings if f.severity == "error")


def _by_folder(findings: Iterable[Finding]) -> dict[str | None, tuple[Finding, ...]]:
    out: dict[str | None, list[Finding]] = {}
    for finding in findings:
        out.setdefault(folder_of(finding.location.file), []).append(finding)
    return {k: tuple(v) for k, v in out.items()}


def _claims_by_unit(plan: plans.Plan, *, units: Mapping[str, set[str]]) -> dict[str, tuple[plans.Desired, ...]]:
    """The plan's rendered claims, by the unit their file belongs to."""
    unit_files = {p: u for u, paths in units.items() for p in paths}
    out: dict[str, list[plans.Desired]] = {}
    for desired in plan.objects:
        if desired.ref.kind not in CLAIM_KINDS:
            continue
        unit = unit_files.get(renders.source_file(desired.source))
        if unit is not None:
            out.setdefault(unit, []).append(desired)
    return {k: tuple(v) for k, v in out.items()}


__all__ = ["CLAIM_KINDS", "Increments", "Outcome", "folder_of", "unit_of"]
