"""A check made from the last one (``fleet.engine.increments``) answers what a full check answers.

Random commit sequences (seeded) on the example fleet: claims added, changed, moved between
namespaces, broken and fixed, deleted; Teams, DeviceClasses, pools, the Cluster and fleet.yaml
changed; teams added and removed. After every commit the incremental answer (error findings and
plan) equals the one ``fleetctl validate`` and ``render`` would give on the same files, made by a
fresh load.
"""

from __future__ import annotations

import random
from pathlib import Path

from fleet.engine import increments, plans, renders
from fleet.manifests import Finding, ParseCache, load_revision, resolve
from fleet.policy import validate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet"
CLUSTER = "gpu-east"
CLASSES = ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com", "missing.example.com"]
SELECTORS = [
    "",
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
    "device.attributes['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].noSuchAttribute == 'x'",
    "device.driver ==",  # does not compile
]


def example() -> dict[str, bytes]:
    files = {str(p.relative_to(EXAMPLE)): p.read_bytes() for p in EXAMPLE.rglob("*.yaml")}
    assert len(files) > 20
    return files


def reference(files: dict[str, bytes], *, revision: str) -> tuple[tuple[Finding, ...], plans.Plan | None]:
    """What a fresh process answers: the uncached pipeline's steps."""
    loaded = load_revision(files)
    errors = tuple(f for f in validate(loaded, clusters=[CLUSTER]).findings if f.severity == "error")
    if errors:
        return errors, None
    return (), renders.plan(resolve(loaded, cluster=CLUSTER), revision=revision)


def claim(rng: random.Random, *, name: str, namespace: str) -> str:
    selector = rng.choice(SELECTORS)
    request = [
        "- name: gpu",
        "  exactly:",
        f"    deviceClassName: {rng.choice(CLASSES)}",
        f"    count: {rng.choice([1, 1, 2, 4, 40])}",
        *(["    selectors:", f"    - cel: {{expression: {selector!r}}}"] if selector else []),
    ]
    annotation = '  annotations: {fleet.gpufleet.dev/drift: "report"}\n' if rng.random() < 0.1 else ""
    head = f"metadata:\n  name: {name}\n  namespace: {namespace}\n{annotation}"
    if rng.random() < 0.3:
        requests = "".join(f"      {line}\n" for line in request)
        return (
            f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n{head}spec:\n  devices:\n    requests:\n{requests}"
        )
    requests = "".join(f"        {line}\n" for line in request)
    return (
        f"apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n{head}"
        f"spec:\n  spec:\n    devices:\n      requests:\n{requests}"
    )


def team(rng: random.Random, *, name: str, namespace: str) -> str:
    classes = rng.sample(CLASSES[:3], rng.randint(1, 2))
    quota = "".join(f"\n    {c}: {rng.choice([2, 8, 64])}" for c in classes)
    drift = f"\n  driftPolicy: {rng.choice(['report', 'ignore'])}" if rng.random() < 0.2 else ""
    return (
        f"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Team\nmetadata:\n  name: {name}\nspec:\n"
        f"  namespaces: [{namespace}]\n  owners:\n  - kind: Group\n    name: {name}-admins\n"
        f"  deviceClasses: [{', '.join(classes)}]\n  quota:{quota}{drift}\n"
    )


def commit(rng: random.Random, files: dict[str, bytes], step: int) -> None:
    """One random change to ``files``: mostly to claims (the common commit), sometimes fleet-wide."""
    folders = sorted({p.split("/")[1] for p in files if p.startswith("teams/") and p.count("/") == 2})
    claims = sorted(p for p in files if p.startswith("teams/") and not p.endswith("team.yaml"))
    namespaces = ["inference", "inference-canary", "ml-research", "kube-system", *(f"new{n}" for n in range(3))]
    folder = rng.choice(folders) if folders else "ml-research"
    roll = rng.random()
    if roll < 0.30 or not claims:  # add a claim (sometimes a name already taken)
        name = rng.choice([f"c{step}", f"c{step}", "single-gpu", "two-gpus"])
        files[f"teams/{folder}/{name}-{step}.yaml"] = claim(rng, name=name, namespace=rng.choice(namespaces)).encode()
    elif roll < 0.50:  # change one
        path = rng.choice(claims)
        files[path] = claim(rng, name=f"x{step}", namespace=rng.choice(namespaces)).encode()
    elif roll < 0.60:
        del files[rng.choice(claims)]
    elif roll < 0.68:  # break one; a later change or deletion fixes it
        files[rng.choice(claims)] = rng.choice([b"kind: [unclosed\n", b"apiVersion: v1\nkind: ConfigMap\n", b"- 1\n"])
    elif roll < 0.72:  # two documents in one file
        docs = [claim(rng, name=f"d{step}-{i}", namespace=rng.choice(namespaces)) for i in range(2)]
        files[f"teams/{folder}/multi-{step}.yaml"] = "---\n".join(docs).encode()
    elif roll < 0.77:  # a Team changes, appears or goes
        if rng.random() < 0.5 or f"teams/{folder}/team.yaml" not in files:
            files[f"teams/{folder}/team.yaml"] = team(rng, name=folder, namespace=rng.choice(namespaces)).encode()
        else:
            del files[f"teams/{folder}/team.yaml"]
    elif roll < 0.80:  # a new team folder
        name = f"team{step}"
        files[f"teams/{name}/team.yaml"] = team(rng, name=name, namespace=f"new{step % 3}").encode()
        files[f"teams/{name}/first.yaml"] = claim(rng, name="first", namespace=f"new{step % 3}").encode()
    elif roll < 0.84:  # a DeviceClass changes or goes
        path = rng.choice(sorted(p for p in files if p.startswith("deviceclasses/")) or ["deviceclasses/x.yaml"])
        if rng.random() < 0.3 and path in files:
            del files[path]
        else:
            name = path.removeprefix("deviceclasses/").removesuffix(".yaml")
            expression = rng.choice(["device.driver == 'gpu.nvidia.com'", "true", "device.driver =="])
            files[path] = (
                f"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: {name}\nspec:\n"
                f"  selectors:\n  - cel:\n      expression: {expression!r}\n"
            ).encode()
    elif roll < 0.88:  # a pool
        path = rng.choice(sorted(p for p in files if p.startswith("pools/")) or ["pools/h100.yaml"])
        text = files.get(path, b"").decode()
        files[path] = text.replace("nodes: 4", "nodes: 5").replace("count: 8", "count: 4").encode()
        if rng.random() < 0.3:
            files.pop(path)
    elif roll < 0.92:  # fleet.yaml
        text = files["fleet.yaml"].decode()
        files["fleet.yaml"] = (
            text.replace("driftPolicy: enforce", "driftPolicy: report")
            if "enforce" in text
            else text.replace("driftPolicy: report", "driftPolicy: enforce")
        ).encode()
    elif roll < 0.95:  # the Cluster
        text = files[f"clusters/{CLUSTER}.yaml"].decode()
        version = rng.choice(['"1.34"', '"1.35"', '"1.36"'])
        files[f"clusters/{CLUSTER}.yaml"] = "\n".join(
            f"  kubernetesVersion: {version}" if "kubernetesVersion" in line else line for line in text.splitlines()
        ).encode()
    elif roll < 0.97:  # a claim outside the team folders (fleet-wide, and refused)
        files[f"claims/stray-{step}.yaml"] = claim(rng, name=f"s{step}", namespace="ml-research").encode()
    else:  # a file restored as the example had it
        original = example()
        path = rng.choice(sorted(original))
        files[path] = original[path]


def test_incremental_checks_equal_full_ones() -> None:
    checks = partial = 0
    for seed in range(16):
        rng = random.Random(seed)
        files = example()
        state = increments.Increments()
        cache = ParseCache()
        for step in range(30):
            if step:
                commit(rng, files, step)
            revision = f"r{seed}-{step}"
            got = state.check(dict(files), cluster=CLUSTER, revision=revision, read=(), cache=cache)
            findings, plan = reference(files, revision=revision)
            assert got.findings == findings, f"seed {seed} step {step}"
            assert got.plan == plan, f"seed {seed} step {step}"
            assert len(cache) <= len(files), "the parse cache holds one entry per file"
        checks += 30
        partial += state.partial_checks
    assert partial >= checks // 3, "most of these commits change claims only: many checks are partial"


TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: {name}
  namespace: inference
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
"""


def test_claim_commits_are_partial() -> None:
    """The property above would also hold if every check were full: count the partial ones. (A
    revision whose claims make findings outside their folder, such as a quota an overlay set and
    the claims overrun, is checked fully until it is fixed.)"""
    files = example()
    state = increments.Increments()
    cache = ParseCache()
    state.check(dict(files), cluster=CLUSTER, revision="r0", cache=cache, read=())
    for step in range(1, 21):
        files[f"teams/inference/c{step}.yaml"] = TEMPLATE.format(name=f"c{step}").encode()
        if step % 5 == 0:
            del files[f"teams/inference/c{step - 1}.yaml"]
        got = state.check(dict(files), cluster=CLUSTER, revision=f"r{step}", read=(), cache=cache)
        assert (got.findings, got.plan) == reference(files, revision=f"r{step}")
    assert (state.full_checks, state.partial_checks) == (1, 20)


def test_a_fleet_wide_change_checks_everything() -> None:
    files = example()
    state = increments.Increments()
    cache = ParseCache()
    state.check(dict(files), cluster=CLUSTER, revision="r0", read=(), cache=cache)
    files["teams/ml-research/team.yaml"] = files["teams/ml-research/team.yaml"].replace(
        b"gpu.nvidia.com: 16", b"gpu.nvidia.com: 1"
    )
    got = state.check(dict(files), cluster=CLUSTER, revision="r1", read=(), cache=cache)
    assert state.full_checks == 2
    assert {f.rule for f in got.findings} == {"team-quota"}
    assert got.findings == reference(files, revision="r1")[0]


def test_a_carried_object_is_the_rendered_one_for_the_new_revision() -> None:
    """``renders.carried`` keeps the Ref and leaves computed once, and equals a fresh render (of the
    declared objects: a team's objects carry the revision in their body and are rendered afresh)."""
    files = example()
    old = reference(files, revision="r1")[1]
    new = reference(files, revision="r2")[1]
    assert old is not None and new is not None
    declared = [(b, a) for b, a in zip(old.objects, new.objects, strict=True) if b.revision]
    assert len(declared) >= 10
    for before, after in declared:
        assert before.leaves  # computed once, for the first revision
        copy = renders.carried(before, revision="r2")
        assert copy == after and copy.obj == after.obj and copy.leaves == after.leaves
        assert copy.ref is before.ref and copy.leaves is before.leaves  # carried, not computed again


def test_an_overlay_patching_a_claim_makes_every_check_full() -> None:
    """A claim's overlay lives outside its folder: a change to the claim reaches the overlay's findings."""
    files = example()
    files["overlays/claims/overlay.yaml"] = (
        b"apiVersion: fleet.gpufleet.dev/v1alpha1\nkind: Overlay\nmetadata:\n  name: claims\nspec:\n"
        b"  clusters:\n    names: [gpu-east]\n  patches:\n  - target:\n      apiVersion: resource.k8s.io/v1\n"
        b"      kind: ResourceClaimTemplate\n      name: single-gpu\n      namespace: ml-research\n"
        b"    patch:\n      metadata:\n        labels: {tier: gold}\n"
    )
    state = increments.Increments()
    cache = ParseCache()
    state.check(dict(files), cluster=CLUSTER, revision="r0", read=(), cache=cache)
    del files["teams/ml-research/single-gpu.yaml"]  # the overlay's target goes: a finding in the overlay
    got = state.check(dict(files), cluster=CLUSTER, revision="r1", read=(), cache=cache)
    assert (state.full_checks, state.partial_checks) == (2, 0)
    assert {f.location.file for f in got.findings} == {"overlays/claims/overlay.yaml"}
    assert (got.findings, got.plan) == reference(files, revision="r1")


def test_equal_specs_of_cached_manifests_are_one_object() -> None:
    """What the controller keeps of claims stamped from one pattern: their specs and labels once."""
    files = example()
    claim = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: {name}\n"
        "  namespace: ml-research\n  labels: {{tier: gold}}\nspec:\n  spec:\n    devices:\n      requests:\n"
        "      - name: gpu\n        exactly:\n          deviceClassName: gpu.nvidia.com\n"
    )
    for name in ("same-a", "same-b"):
        files[f"teams/ml-research/{name}.yaml"] = claim.format(name=name).encode()
    cache = ParseCache()
    state = increments.Increments()
    outcome = state.check(dict(files), cluster=CLUSTER, revision="r1", read=(), cache=cache)
    assert outcome.plan is not None and outcome.findings == reference(files, revision="r1")[0]
    a, b = (state.parsed[f"teams/ml-research/{n}.yaml"][0][0] for n in ("same-a", "same-b"))
    assert a.data["spec"] is b.data["spec"] and a.data["metadata"]["labels"] is b.data["metadata"]["labels"]
    assert a.data["metadata"] is not b.data["metadata"] and a.data["metadata"]["name"] == "same-a"
    assert outcome.plan == reference(files, revision="r1")[1]
