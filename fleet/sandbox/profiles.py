"""Sandbox profiles: which simulated GPU node pools, and which CPU (system) pools, to create.

A profile is a small YAML file::

    pools:
      h100x8: 2      # two nodes with 8 whole H100 GPUs each
      a100x8: 1
      a100-mig: 1    # 8 A100 GPUs, the first two in static MIG mode
      h200x8: 1
      l4x4: 1
    cpuPools:
      system: 1      # untainted nodes without GPUs (the default when cpuPools is absent)

A pool key is ``<model>x<gpus>`` (model h100, a100, h200 or l4; gpus 1, 2, 4 or 8)
or ``<model>-mig`` (8 GPUs of a MIG-capable model, 2 of them in MIG mode), with
an optional ``-<tag>`` to tell apart pools of one model. A one-GPU node is a VM,
as the real H100 node of tests/data/real-gpu is: its GPU has no NUMA node, so the
driver publishes no ``resource.kubernetes.io/numaNode``. A pool is a node count,
or a mapping that also sets how the NVIDIA driver publishes its GPUs::

    pools:
      h100x8-dyn: {nodes: 2, migStrategy: dynamic}       # driver gate DynamicMIG
      h200x8-shared: {nodes: 1, consumableShares: memory} # driver gate ConsumableShares

``migStrategy: dynamic`` publishes every MIG placement as a partitionable device
(A100 and H100: a counter set per GPU, split slices); ``consumableShares``
(``memory``, ``unlimited`` or a share count) makes every device shareable with GPU
memory as consumable capacity. Every GPU node carries the ``nvidia.com/gpu`` taint, as
real GPU nodes do, so a chart's own Deployments and hook Jobs need a node without it:
every real cluster has system nodes, and so does the sandbox unless ``cpuPools: {}``
says otherwise. Profiles are checked completely before anything starts, and every
error names the field and the values that are allowed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from fleet.sandbox import gpus
from fleet.sandbox.errors import ProfileError

GPU_COUNTS = (1, 2, 4, 8)
MAX_NODES = 2000
_POOL = re.compile(r"^(?P<model>[a-z0-9]+)(?:x(?P<count>\d+)|(?P<mig>-mig))(?:-(?P<tag>[a-z0-9]+))?$")
OPTIONS = ("nodes", "migStrategy", "consumableShares")

_CPU_POOL = re.compile(r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")

DEFAULT: dict[str, int] = {"h100x8": 2, "a100x8": 1, "a100-mig": 1, "h200x8": 1, "l4x4": 1}
DEFAULT_CPU: dict[str, int] = {"system": 1}


@dataclass(frozen=True)
class Profile:
    """Validated pools, in the order written: pool key → node count (GPU pools, then CPU pools)."""

    pools: dict[str, int]
    options: dict[str, dict[str, str]] = field(default_factory=dict)
    """GPU pool key → ``{migStrategy, consumableShares}`` where a pool sets them."""
    cpu_pools: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_CPU))

    def cpu_nodes(self) -> list[tuple[str, str]]:
        """(node name, pool) of every CPU node: ``system-01``, ..."""
        return [(f"{pool}-{i + 1:02d}", pool) for pool, count in self.cpu_pools.items() for i in range(count)]

    def nodes(self) -> list[gpus.NodeSpec]:
        """Every node of every pool, with a stable name and ordinal."""
        out: list[gpus.NodeSpec] = []
        for key, count in self.pools.items():
            m = _POOL.match(key)
            assert m is not None  # checked in parse()
            model = gpus.MODELS[m["model"]]
            per_node = 8 if m["mig"] else int(m["count"])
            mig = 2 if m["mig"] else 0
            options = self.options.get(key, {})
            for i in range(count):
                out.append(
                    gpus.NodeSpec(
                        name=f"{key}-{i + 1:02d}",
                        ordinal=len(out) + 1,
                        pool=key,
                        model=model,
                        gpus=per_node,
                        mig_gpus=mig,
                        mig_strategy=options.get("migStrategy", "static"),
                        consumable_shares=options.get("consumableShares", ""),
                        # one GPU per node: a VM, whose kernel reports no NUMA node (tests/data/real-gpu)
                        numa=per_node > 1,
                    )
                )
        return out


def allowed_pools() -> list[str]:
    keys = [f"{m}x{n}" for m in gpus.MODELS for n in GPU_COUNTS]
    keys += [f"{m}-mig" for m, model in gpus.MODELS.items() if model.mig_profiles]
    return keys


def _line(mapping: Any, key: Any, source: str) -> str:
    """``file:line`` of a key when the document was loaded round-trip (ruamel keeps positions)."""
    lc: Any = getattr(mapping, "lc", None)
    try:
        line, col = lc.key(key)
    except (AttributeError, KeyError, TypeError):
        return source
    return f"{source}:{int(line) + 1}:{int(col) + 1}"


def parse(data: Any, *, source: str = "<profile>") -> Profile:
    """Check a loaded profile document and return it; raise ProfileError naming the field."""
    if not isinstance(data, dict):
        raise ProfileError(
            "a profile must be a mapping with a 'pools' key",
            where=source,
            hint="write e.g. 'pools: {h100x8: 2, a100x8: 1}'",
        )
    unknown = sorted(set(data) - {"pools", "cpuPools"})
    if unknown:
        raise ProfileError(f"unknown field {unknown[0]!r}", where=source, hint="the fields are 'pools' and 'cpuPools'")
    pools = data.get("pools")
    if not isinstance(pools, dict) or not pools:
        raise ProfileError(
            "'pools' must be a non-empty mapping of pool → node count",
            where=f"{source}: pools",
            hint="write e.g. 'pools: {h100x8: 2}'",
        )
    allowed = allowed_pools()
    total = 0
    options: dict[str, dict[str, str]] = {}
    counts: dict[str, int] = {}
    for key, count in pools.items():
        where = f"{_line(pools, key, source)}: pools.{key}"
        m = _POOL.match(str(key))
        if m is None or m["model"] not in gpus.MODELS:
            raise ProfileError(f"unknown GPU pool {key!r}", where=where, hint=f"allowed pools: {', '.join(allowed)}")
        if m["count"] is not None and int(m["count"]) not in GPU_COUNTS:
            raise ProfileError(
                f"{m['count']} GPUs per node is not offered",
                where=where,
                hint=f"GPUs per node must be one of {GPU_COUNTS}; allowed pools: {', '.join(allowed)}",
            )
        if m["mig"] and not gpus.MODELS[m["model"]].mig_profiles:
            raise ProfileError(
                f"{m['model']} has no MIG profiles in the sandbox",
                where=where,
                hint=f"allowed pools: {', '.join(allowed)}",
            )
        if isinstance(count, dict):
            count, chosen = _options(count, where=where, model=gpus.MODELS[m["model"]])
            options[str(key)] = chosen
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ProfileError(
                f"node count must be a whole number ≥ 0, got {count!r}", where=where, hint="write e.g. 'h100x8: 2'"
            )
        total += count
        counts[str(key)] = count
    if total == 0:
        raise ProfileError("the profile creates no nodes", where=f"{source}: pools", hint="give a pool a count ≥ 1")
    cpu = _cpu_pools(data.get("cpuPools", dict(DEFAULT_CPU)), gpu_pools=pools, source=source)
    total += sum(cpu.values())
    if total > MAX_NODES:
        raise ProfileError(
            f"{total} nodes is more than the sandbox's limit of {MAX_NODES}",
            where=f"{source}: pools",
            hint="lower the counts",
        )
    return Profile(pools=counts, options=options, cpu_pools=cpu)


def _options(raw: dict[Any, Any], *, where: str, model: gpus.GpuModel) -> tuple[Any, dict[str, str]]:
    """(node count, driver options) of a pool written as a mapping."""
    unknown = sorted(str(k) for k in set(raw) - set(OPTIONS))
    if unknown:
        raise ProfileError(f"unknown pool field {unknown[0]!r}", where=where, hint=f"pool fields: {', '.join(OPTIONS)}")
    chosen: dict[str, str] = {}
    strategy = raw.get("migStrategy", "static")
    if strategy not in gpus.MIG_STRATEGIES:
        raise ProfileError(
            f"migStrategy {strategy!r} is not known", where=where, hint=f"one of {', '.join(gpus.MIG_STRATEGIES)}"
        )
    if strategy == "dynamic":
        if not model.mig_profiles:
            raise ProfileError(
                f"{model.product_name} has no MIG profiles in the sandbox",
                where=where,
                hint="migStrategy: dynamic needs a MIG-capable model: "
                + ", ".join(k for k, v in gpus.MODELS.items() if v.mig_profiles),
            )
        chosen["migStrategy"] = "dynamic"
    shares = str(raw.get("consumableShares", ""))
    if shares not in gpus.CONSUMABLE_SHARES and not (shares.isdigit() and int(shares) > 0):
        raise ProfileError(
            f"consumableShares {shares!r} is not a mode of the driver",
            where=where,
            hint="memory, unlimited or a share count such as 4",
        )
    if shares:
        chosen["consumableShares"] = shares
    return raw.get("nodes", 1), chosen


def _cpu_pools(cpu: Any, *, gpu_pools: dict[Any, Any], source: str) -> dict[str, int]:
    if cpu is None:
        cpu = {}
    if not isinstance(cpu, dict):
        raise ProfileError(
            "'cpuPools' must be a mapping of pool name → node count",
            where=f"{source}: cpuPools",
            hint="write e.g. 'cpuPools: {system: 1}', or 'cpuPools: {}' for none",
        )
    out: dict[str, int] = {}
    for key, count in cpu.items():
        where = f"{_line(cpu, key, source)}: cpuPools.{key}"
        if not isinstance(key, str) or not _CPU_POOL.match(key):
            raise ProfileError(
                f"CPU pool name {key!r} is not a DNS label", where=where, hint="write e.g. 'system' or 'infra'"
            )
        if key in gpu_pools or _POOL.match(key):
            raise ProfileError(
                f"CPU pool name {key!r} reads as a GPU pool", where=where, hint="name CPU pools e.g. 'system'"
            )
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ProfileError(
                f"node count must be a whole number ≥ 0, got {count!r}", where=where, hint="write e.g. 'system: 1'"
            )
        out[key] = count
    return out


def load(path: Path | None) -> Profile:
    """Read a profile file (or the built-in default when ``path`` is None)."""
    if path is None:
        return Profile(pools=dict(DEFAULT))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(
            f"cannot read profile: {exc}", where=str(path), hint="pass a readable UTF-8 YAML file"
        ) from exc
    try:
        yaml = YAML(typ="rt")
        yaml.allow_duplicate_keys = False
        data = yaml.load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ProfileError(f"invalid YAML: {problem}", where=where, hint="fix the YAML syntax") from exc
    return parse(data, source=str(path))


__all__ = ["DEFAULT", "DEFAULT_CPU", "Profile", "allowed_pools", "load", "parse"]
