"""What a change does per cluster against a base (``fleet.policy.reviews``, ``tenancy.quota_use``): pure."""

from __future__ import annotations

from fleet.manifests import resolve
from fleet.policy import reviews, tenancy
from tests.manifests.repos import example_files, load, yaml

BIG_PAIR = yaml("""
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaimTemplate
    metadata: {name: big-pair, namespace: ml-research}
    spec:
      spec:
        devices:
          requests:
          - name: pick
            firstAvailable:
            - {name: four, deviceClassName: gpu.nvidia.com, count: 4}
            - {name: two, deviceClassName: gpu.nvidia.com, count: 2}
          - name: every-mig
            exactly: {deviceClassName: mig.nvidia.com, allocationMode: All}
    """)


def test_quota_use_counts_the_largest_alternative_and_marks_all() -> None:
    files = example_files()
    files["teams/ml-research/big-pair.yaml"] = BIG_PAIR
    view = resolve(load(files), cluster="gpu-west")
    use = {(u.team, u.device_class): u for u in tenancy.quota_use(view.manifests)}
    assert use[("ml-research", "gpu.nvidia.com")] == tenancy.QuotaUse("ml-research", "gpu.nvidia.com", 16, 5 + 4)
    assert use[("ml-research", "mig.nvidia.com")] == tenancy.QuotaUse(
        "ml-research", "mig.nvidia.com", 4, 0, unbounded=True
    )
    assert ("inference", "gpu.nvidia.com") not in use, "the inference team does not run on gpu-west"


def test_review_against_a_base_lists_added_and_changed_claims_and_quotas() -> None:
    base = load(example_files())
    files = example_files()
    files["teams/ml-research/big-pair.yaml"] = BIG_PAIR
    files["teams/ml-research/two-gpus.yaml"] = files["teams/ml-research/two-gpus.yaml"].replace(
        b"count: 2", b"count: 3"
    )
    files["teams/ml-research/team.yaml"] = files["teams/ml-research/team.yaml"].replace(b": 16", b": 12")
    review = reviews.review(load(files), base=base, cluster="gpu-west")
    assert [(c.object, c.change) for c in review.claims] == [
        ("ResourceClaimTemplate/ml-research/big-pair", "added"),
        ("ResourceClaimTemplate/ml-research/two-gpus", "changed"),
    ]
    three = review.claims[1]
    assert three.declared and [(p.pool, p.nodes, p.copies) for p in three.pools if p.nodes] == [("h100", 2, 4)]
    assert three.copies == 4, "8 GPUs a node hold two copies of 3; the A100s of a100-mig are all MIG"
    gpus = next(q for q in review.quotas if q.device_class == "gpu.nvidia.com")
    assert gpus.before is not None and gpus.after is not None
    assert (gpus.before.quota, gpus.before.requested, gpus.after.quota, gpus.after.requested) == (16, 5, 12, 10)
    assert gpus.changed
    assert not reviews.review(base, base=base, cluster="gpu-west").claims, "no change, no claims"
    everything = reviews.review(base, base=None, cluster="gpu-west").claims
    assert {c.change for c in everything} == {"added"} and len(everything) == 4
