"""Removing teams with --prune: what proving each namespace empty costs before fleet deletes it.

A namespace fleet created is deleted only when it holds nothing fleet did not put there, so
pruning a team lists every namespaced kind the server can list in each of its namespaces
(``fleet.engine.blockers``). This benchmark applies ``--teams`` teams with one namespace and
two templates each, puts one ConfigMap of someone else's into one namespace, removes every
team and runs ``apply --prune`` once. It reports the prune's wall time, the list and discovery
requests it sent, how many namespaces went and how many were blocked (expected: one).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio
from common import result, sandbox

from fleet import engine, kube
from fleet.engine.pipelines import load_plan

CLUSTER = "bench-prune"
CLASS = "bench.gpu.example.com"


def write_repo(root: Path, *, teams: int) -> None:
    for path in sorted(root.rglob("*.yaml"), reverse=True):
        path.unlink()
    files = {
        "fleet.yaml": f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Fleet\nmetadata:\n  name: bench\n"
        f"spec:\n  clusters: [{CLUSTER}]\n",
        f"clusters/{CLUSTER}.yaml": f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Cluster\nmetadata:\n"
        f'  name: {CLUSTER}\nspec:\n  kubernetesVersion: "1.36"\n',
        f"deviceclasses/{CLASS}.yaml": (
            f"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: {CLASS}\n"
            "spec:\n  selectors:\n  - cel:\n      expression: \"device.driver == 'gpu.nvidia.com'\"\n"
        ),
    }
    for t in range(teams):
        files[f"teams/team{t}/team.yaml"] = (
            f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Team\nmetadata:\n  name: team{t}\nspec:\n"
            f"  namespaces: [team{t}]\n  owners:\n  - kind: Group\n    name: team{t}\n"
            f"  deviceClasses: [{CLASS}]\n"
        )
        for n in range(2):
            files[f"teams/team{t}/t{n}.yaml"] = (
                f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: t{n}\n"
                f"  namespace: team{t}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n"
                f"        exactly:\n          deviceClassName: {CLASS}\n"
            )
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


async def run(kubeconfig: str, repo: Path, teams: int) -> dict[str, object]:
    client = await kube.connect(kubeconfig=kubeconfig)
    try:
        write_repo(repo, teams=teams)
        plan = load_plan(repo, cluster=CLUSTER)
        options = engine.Options(health_timeout=120)
        applied = await engine.reconcile(client=client, plan=plan, options=options)
        assert not applied.failed, applied.failed
        foreign = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "notes", "namespace": "team0"}}
        await client.apply(foreign, field_manager="someone")

        write_repo(repo, teams=0)
        plan = load_plan(repo, cluster=CLUSTER)
        before = dict(client.counts.by_verb)
        started = time.perf_counter()
        pruned = await engine.reconcile(
            client=client, plan=plan, options=engine.Options(prune=True, health_timeout=120)
        )
        seconds = time.perf_counter() - started
        sent = {verb: n - before.get(verb, 0) for verb, n in client.counts.by_verb.items()}
        namespaces = [e for e in pruned.entries if e.ref.kind == "Namespace"]
        return {
            "teams": teams,
            "prune_s": round(seconds, 2),
            "lists": sent.get("list", 0),
            "discovery": sent.get("discovery", 0),
            "namespaces_deleted": sum(1 for e in namespaces if e.action == engine.Action.DELETED and not e.failed),
            "namespaces_blocked": sum(1 for e in namespaces if e.refused),
        }
    finally:
        await client.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, default=20)
    args = parser.parse_args(argv)
    with sandbox({"h100x8": 1}) as sb, tempfile.TemporaryDirectory(prefix="fleet-bench-prune-") as tmp:
        figures = anyio.run(run, str(sb.kubeconfig), Path(tmp) / "repo", args.teams)
    print(
        f"prune of {figures['teams']} teams: {figures['prune_s']} s, {figures['lists']} lists, "
        f"{figures['discovery']} discovery requests; {figures['namespaces_deleted']} namespaces deleted, "
        f"{figures['namespaces_blocked']} blocked"
    )
    result(**figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
