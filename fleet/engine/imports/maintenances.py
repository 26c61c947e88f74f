"""Pure: a cluster's DeviceTaintRules → GPUMaintenances (``clusters/<cluster>/maintenance/<name>.yaml``).

A maintenance is imported whole or not at all. Rules fleet made carry their maintenance's name
(the label ``fleet.gpufleet.dev/maintenance``) and become one file per name; a rule made by hand
becomes a maintenance of its own, named after it and annotated ``fleet.gpufleet.dev/adopt: "true"``,
so that the engine takes the rule over under the name a person gave it rather than writing a twin
beside it (``fleet.engine.maintenances.kept_names``). Its rules become fleet's own (``created``):
removing the file deletes them and returns the devices.

The file names the devices as the engine reads them back (``selections``, checked against the
engine's own expansion); its effect is the rules' own (``direct: true`` at ``NoSchedule`` only:
``direct`` says why); its reason is the rules' ``fleet.gpufleet.dev/reason``, else a sentence naming
the rules and their taint; ``allowFullPool`` where the rules have every GPU of a GPUNodePool out
already. The one content the take-over changes
is a hand-made rule's taint, which becomes fleet's, and only where no claim tells the two apart
(``tolerations``). Everything else is an IMPORT.md row saying why and what to do: another driver's
rule, a selector without driver or pool, a pool no node publishes, a device the pool does not
publish, a taint some claim tells apart, rules of one maintenance at different effects, devices
another maintenance takes already, rules the engine would not give back as they are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from fleet.engine import maintenances as fleet_rules
from fleet.engine import ownership
from fleet.engine.imports import selections, tolerations
from fleet.engine.imports.documents import Document, Imported, Unmapped
from fleet.engine.imports.lives import Live
from fleet.engine.imports.pools import GPU_DRIVER
from fleet.inventory.inventories import Inventory, InventoryError
from fleet.kube import Ref
from fleet.manifests import kinds
from fleet.manifests.maintenances import GPUMaintenanceSpec
from fleet.policy import featuregates

KIND = "DeviceTaintRule"
FOLDER = "maintenance"
"""``clusters/<cluster>/maintenance/``: a maintenance of this cluster alone."""
NAME_LIMIT = 63
"""A maintenance's name is a DNS label, the rules' label value and their taint's value."""
REASON_LIMIT = next(
    int(m.max_length) for m in GPUMaintenanceSpec.model_fields["reason"].metadata if hasattr(m, "max_length")
)


def taint_rules(live: Live) -> list[dict[str, Any]]:
    """The DeviceTaintRules of ``live.others`` under the API fleet carries maintenance out through on the
    cluster (``featuregates.maintenance_api``; none where it has none). Served under other versions too,
    they are the same objects."""
    api = featuregates.maintenance_api(live.features)
    return [o for o in live.others if o["kind"] == KIND and o["apiVersion"] == api] if api else []


def maintenances(live: Live, *, rules: list[dict[str, Any]], cluster: str, context: str, out: Imported) -> None:
    """``rules`` (those of ``taint_rules`` fleet does not manage already) as GPUMaintenance files of
    ``cluster``, their rules handed over as fleet's; what cannot be, as IMPORT.md rows."""
    if not rules:
        return
    every = taint_rules(live)
    try:
        inventory = Inventory.from_slices(live.slices)
    except InventoryError as err:
        for rule in rules:
            reason = f"the ResourceSlices cannot be read ({err.what}), nor the devices it selects; it stays as it is"
            out.unmapped.append(Unmapped(_what([rule]), reason))
        return
    over = selections.Expansion(
        inventory=inventory,
        api=featuregates.maintenance_api(live.features),
        rules={str(r["metadata"]["name"]): r for r in every},
        cluster=cluster,
    )
    mapping = _Mapping(live=live, over=over, tolerated=tolerations.of(live), context=context, out=out)
    groups: dict[str, list[dict[str, Any]]] = {}
    by_hand: list[dict[str, Any]] = []
    for rule in sorted(rules, key=lambda r: str(r["metadata"]["name"])):
        label = fleet_rules.owner(rule)
        if label:
            groups.setdefault(label, []).append(rule)
        else:
            by_hand.append(rule)
    for name, grouped in sorted(groups.items()):
        mapping.one(name, grouped, adopt=False)
    names = set(groups) | {fleet_rules.owner(r) for r in every} - {""}
    for rule in by_hand:
        name = _name(str(rule["metadata"]["name"]), taken=names)
        names.add(name)
        mapping.one(name, [rule], adopt=True)


class _Mapping:
    """One import's maintenances, one at a time: what each takes is not another's to take."""

    def __init__(
        self,
        *,
        live: Live,
        over: selections.Expansion,
        tolerated: tolerations.Tolerations,
        context: str,
        out: Imported,
    ) -> None:
        self.live = live
        self.over = over
        self.by_pool = over.by_pool()
        self.tolerated = tolerated
        self.context = context
        self.out = out
        self.taken: dict[tuple[str, str, str], str] = {}
        """Device → the maintenance imported with it."""

    def one(self, name: str, rules: list[dict[str, Any]], *, adopt: bool) -> None:
        """The maintenance ``name`` of ``rules``: its file and handover, or one row saying why not."""
        row = self._unmappable(name, rules, adopt=adopt)
        if row is not None:
            self.out.unmapped.append(Unmapped(_what(rules, maintenance="" if adopt else name), row))

    def _unmappable(self, name: str, rules: list[dict[str, Any]], *, adopt: bool) -> str | None:
        read = [(str(r["metadata"]["name"]), selections.selected(r, by_pool=self.by_pool)) for r in rules]
        problems = [(n, s) for n, s in read if isinstance(s, str)]
        if problems:
            return _joined(problems, whole=len(rules) > 1)
        found = [s for _, s in read if isinstance(s, selections.Selected)]
        effects = sorted({fleet_rules.effect_of(r) or "None" for r in rules})
        if len(effects) > 1:
            shown = ", ".join(f"{r['metadata']['name']} {fleet_rules.effect_of(r)}" for r in rules)
            return (
                f"its rules are at different effects ({shown}) and a GPUMaintenance has one: writing any would "
                "move some; they stay as they are. Give them one effect with kubectl (or delete the lower ones) and "
                "import again"
            )
        ids = {(d.driver, d.pool, d.name) for s in found for d in s.devices}
        overlap = sorted({self.taken[i] for i in ids if i in self.taken})
        if overlap:
            return (
                f"its devices are in maintenance {', '.join(overlap)} already, and a device is in one "
                "GPUMaintenance at most; it stays as it is. Delete it, or import again once the other is over"
            )
        effect = effects[0]
        devices, problem = selections.devices(
            name, rules, found, effect=effect, direct=direct(effect), adopt=adopt, over=self.over
        )
        if devices is None:
            return problem
        changed, problem = tolerations.taken_over(name, rules, tolerations=self.tolerated)
        if problem:
            return problem
        self.taken.update(dict.fromkeys(ids, name))
        full = self._full_pool(ids)
        for rule in rules:
            self.out.handover[Ref(self.over.api, KIND, "", str(rule["metadata"]["name"])).key] = "created"
        notes = _notes(rules, context=self.context, adopt=adopt, changed=changed, effect=effect, full=full)
        body = _body(name, rules, devices, effect=effect, adopt=adopt, full=full)
        self.out.documents.append(Document(f"clusters/{self.over.cluster}/{FOLDER}/{name}.yaml", body, notes))
        return None

    def _full_pool(self, ids: Iterable[tuple[str, str, str]]) -> bool:
        """Whether the devices are every GPU of the nodes of a GPUNodePool the import writes: the cluster
        has that pool out already, so the file allows it (``allowFullPool``)."""
        mine = set(ids)
        labels = {str(n["metadata"]["name"]): n["metadata"].get("labels") or {} for n in self.live.nodes}
        for doc in self.out.documents:
            if doc.body.get("kind") != "GPUNodePool":
                continue
            wanted = doc.body["spec"].get("nodeSelector") or {}
            nodes = {n for n, ls in labels.items() if all(ls.get(k) == v for k, v in wanted.items())}
            gpus = {
                (d.driver, d.pool, d.name)
                for d in self.over.inventory.devices
                if d.node in nodes and d.driver == GPU_DRIVER
            }
            if gpus and gpus <= mine:
                return True
        return False


def _body(
    name: str, rules: list[dict[str, Any]], devices: dict[str, list[str]], *, effect: str, adopt: bool, full: bool
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if adopt:
        metadata["annotations"] = {ownership.ADOPT: ownership.ADOPT_VALUE}
    spec: dict[str, Any] = {"devices": devices, "reason": _reason(rules), "effect": effect}
    if direct(effect):
        spec["direct"] = True
    if full:
        spec["allowFullPool"] = True
    return {"apiVersion": kinds.API_VERSION, "kind": "GPUMaintenance", "metadata": metadata, "spec": spec}


def _reason(rules: list[dict[str, Any]]) -> str:
    """The rules' ``fleet.gpufleet.dev/reason`` when they agree on one, else where they came from."""
    given = {str(((r["metadata"].get("annotations") or {}).get(fleet_rules.REASON)) or "") for r in rules}
    if len(given) == 1 and "" not in given:
        return given.pop()[:REASON_LIMIT]
    names = ", ".join(str(r["metadata"]["name"]) for r in rules)
    taints = ", ".join(sorted({tolerations.text((r.get("spec") or {}).get("taint") or {}) for r in rules}))
    plural = "s" if len(rules) > 1 else ""
    said = f"Imported by fleetctl import from DeviceTaintRule{plural} {names} with taint {taints}."
    return said if len(said) <= REASON_LIMIT else said[: REASON_LIMIT - 1] + "…"


def _notes(
    rules: list[dict[str, Any]], *, context: str, adopt: bool, changed: list[str], effect: str, full: bool
) -> str:
    """The file's origin comment: where the rules came from and what the take-over makes of them."""
    notes = [f"{_what(rules)}, read from context {context}"]
    if adopt:
        notes.append("made by hand: fleet takes it over under its own name (fleet.gpufleet.dev/adopt)")
    if changed:
        notes.append(
            f"the taint of {', '.join(changed)} becomes fleet's ({fleet_rules.TAINT_KEY}=<name>): no claim or "
            "template tolerates one and not the other"
        )
    if direct(effect):
        notes.append("direct: the rules are at NoSchedule already; one made anew is not walked through None")
    elif effect == "NoExecute":
        notes.append(
            "the rules stay at NoExecute (a rule at its maintenance's effect is not walked back); one made anew "
            "walks None, NoSchedule, NoExecute under the cluster's disruption policy"
        )
    if full:
        notes.append("allowFullPool: the cluster has every GPU of a pool out already")
    notes.append("removing this file deletes the rules and returns the devices")
    return "; ".join(notes)


def _what(rules: Sequence[dict[str, Any]], *, maintenance: str = "") -> str:
    names = ", ".join(str(r["metadata"]["name"]) for r in rules)
    plural = "s" if len(rules) > 1 else ""
    return f"DeviceTaintRule{plural} {names}" + (f" (maintenance {maintenance})" if maintenance else "")


def _joined(problems: Sequence[tuple[str, object]], *, whole: bool) -> str:
    if not whole:
        return str(problems[0][1])
    shown = "; ".join(f"{name}: {problem}" for name, problem in problems)
    return f"a maintenance is imported whole or not at all, and {shown}"


def direct(effect: str) -> bool:
    """Whether the file says ``direct: true``: for rules at ``NoSchedule``, so that one made anew (deleted
    by hand) is not walked back through ``None``. Rules at ``NoExecute`` stay there without it (``staged``
    keeps a rule at its maintenance's effect), and a direct ``NoExecute`` with nothing to hold the
    eviction back is what ``validate`` refuses (``maintenance-direct``)."""
    return effect == "NoSchedule"


def _name(rule: str, *, taken: set[str]) -> str:
    """A maintenance name for a rule made by hand: its own as a DNS label (``.`` to ``-``, at most 63
    characters: also the rules' label value), not one another maintenance has."""
    digest = hashlib.sha256(rule.encode()).hexdigest()[:10]
    label = rule.replace(".", "-")
    base = label if len(label) <= NAME_LIMIT else f"{label[:52].rstrip('-')}-{digest}"
    name, n = base, 2
    while name in taken:
        name = f"{base[: NAME_LIMIT - len(str(n)) - 1].rstrip('-')}-{n}"
        n += 1
    return name


__all__ = ["FOLDER", "direct", "maintenances", "taint_rules"]
