"""Initial apply of 10,000 objects: fleet's staged, gated, recorded apply vs a raw concurrent SSA loop.

Both write the same kinds of objects (namespaces, RBAC, quotas, a DeviceClass and
ResourceClaimTemplates rendered by fleet's planner) into the same sandbox at the
same concurrency, each into its own namespaces so both really create everything:

- fleet: ``engine.reconcile`` (list live, diff, apply stage by stage with health
  gates, grow the ledger before each stage, record progress);
- raw: the plan's objects applied with server-side apply by ``kube.Client.apply``,
  namespaces first, then everything else at once, bounded by the same concurrency.
  It checks nothing and records nothing: the ceiling of what the API server takes.

The raw loop runs first and fleet second, then each once more in the other order,
so a change of load on the shared machine affects both. Throughput is objects per
second of wall time; the target is fleet ≥ 70% of the raw loop.

``--impersonate`` compares fleet with itself instead: the same apply with
``--team-impersonation=off`` (today's identity for everything) and ``required`` (every team
template written as its team's ServiceAccount, ``fleet.engine.impersonations``), alternating
in the same way. The figure is the impersonated run's wall time over the plain one's; the
target is ≤ 1.10.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio
from common import result, sandbox
from diff import write_repo

from fleet import engine, kube
from fleet.engine import plans
from fleet.engine.pipelines import load_plan
from fleet.sandbox import Sandbox, binaries


async def fleet_apply(sb: Sandbox, plan: plans.Plan, concurrency: int, mode: str = "optional") -> float:
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    options = engine.Options(concurrency=concurrency, health_timeout=600, impersonation=mode)  # type: ignore[arg-type]
    try:
        started = time.monotonic()
        changes = await engine.reconcile(client=client, plan=plan, options=options)
        wall = time.monotonic() - started
    finally:
        await client.close()
    assert not changes.failed and len(changes.changed) == len(plan.objects), [e.error for e in changes.failed][:3]
    return wall


async def raw_apply(sb: Sandbox, plan: plans.Plan, concurrency: int) -> float:
    client = await kube.connect(kubeconfig=str(sb.kubeconfig), timeout=60)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(obj: dict[str, object]) -> None:
        async with limiter:
            await client.apply(obj, field_manager="raw-loop")

    try:
        started = time.monotonic()
        for wave in (
            [d.obj for d in plan.objects if d.obj["kind"] == "Namespace"],
            [d.obj for d in plan.objects if d.obj["kind"] != "Namespace"],
        ):
            async with anyio.create_task_group() as tg:
                for obj in wave:
                    tg.start_soon(one, obj)
        return time.monotonic() - started
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--impersonate", action="store_true", help="fleet with --team-impersonation=required vs off (target ≤ 1.10)"
    )
    args = parser.parse_args()
    if binaries.locate() is None:
        binaries.build()
    if args.impersonate:
        impersonated(args)
        return
    with sandbox({"h100x8": 1}) as sb, tempfile.TemporaryDirectory(prefix="fleet-bench-repo-") as tmp:
        runs: dict[str, list[float]] = {"fleet": [], "raw": []}
        n = 0
        for round_, order in enumerate((("raw", "fleet"), ("fleet", "raw"))):
            for who in order:
                repo = Path(tmp) / f"{who}{round_}"
                name = f"{who}{round_}"
                n = write_repo(repo, objects=args.objects, prefix=name, cluster=name)
                plan = load_plan(repo, cluster=name)
                if who == "fleet":
                    wall = anyio.run(fleet_apply, sb, plan, args.concurrency)
                else:
                    wall = anyio.run(raw_apply, sb, plan, args.concurrency)
                runs[who].append(len(plan.objects) / wall)
                print(f"{who:6} round {round_ + 1}: {len(plan.objects)} objects in {wall:.1f}s", flush=True)
        fleet_rate = sum(runs["fleet"]) / len(runs["fleet"])
        raw_rate = sum(runs["raw"]) / len(runs["raw"])
        ratio = fleet_rate / raw_rate
        print(f"\ninitial apply of {n} objects at concurrency {args.concurrency}   objects/s (mean of 2)")
        print(f"  fleet (staged, gated, ledger)                  {fleet_rate:7.1f}")
        print(f"  raw concurrent SSA loop                        {raw_rate:7.1f}")
        print(f"  ratio                                          {ratio:7.0%}   (target ≥ 70%)")
        result(
            objects=n,
            concurrency=args.concurrency,
            fleet_per_s=round(fleet_rate, 1),
            raw_per_s=round(raw_rate, 1),
            ratio=round(ratio, 2),
            target=0.7,
            met="yes" if ratio >= 0.7 else "no",
        )


def impersonated(args: argparse.Namespace) -> None:
    """fleet's initial apply as the controller (``off``) and as each team (``required``), alternating."""
    modes = {"plain": "off", "impersonated": "required"}
    with sandbox({"h100x8": 1}) as sb, tempfile.TemporaryDirectory(prefix="fleet-bench-repo-") as tmp:
        walls: dict[str, list[float]] = {"plain": [], "impersonated": []}
        n = 0
        for round_, order in enumerate((("plain", "impersonated"), ("impersonated", "plain"))):
            for who in order:
                name = f"{who[:3]}{round_}"
                repo = Path(tmp) / name
                n = write_repo(repo, objects=args.objects, prefix=name, cluster=name)
                plan = load_plan(repo, cluster=name)
                wall = anyio.run(fleet_apply, sb, plan, args.concurrency, modes[who])
                walls[who].append(wall)
                print(f"{who:12} round {round_ + 1}: {len(plan.objects)} objects in {wall:.1f}s", flush=True)
        plain = sum(walls["plain"]) / len(walls["plain"])
        imp = sum(walls["impersonated"]) / len(walls["impersonated"])
        ratio = imp / plain
        print(f"\ninitial apply of {n} objects at concurrency {args.concurrency}   wall s (mean of 2)")
        print(f"  as the controller (--team-impersonation=off)        {plain:7.1f}")
        print(f"  teams as their ServiceAccounts (required)           {imp:7.1f}")
        print(f"  ratio                                               {ratio:7.2f}   (target ≤ 1.10)")
        result(
            objects=n,
            concurrency=args.concurrency,
            plain_s=round(plain, 1),
            impersonated_s=round(imp, 1),
            ratio=round(ratio, 2),
            target=1.1,
            met="yes" if ratio <= 1.1 else "no",
        )


if __name__ == "__main__":
    main()
