"""Plans kept on disk: a new process takes back the plan of unchanged content, and nothing else.

The cache may only save time: every test here checks that what comes back is exactly what a
fresh load makes, or that the cache stays out of the way (changed content, a corrupt or
foreign entry, a directory others may write, a revision that fails validation).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.engine import plancaches
from fleet.engine.pipelines import check_and_plan, load_plan
from fleet.engine.plancaches import PlanCache
from fleet.manifests import revisions
from tests.apply.repos import Repo


def _repo(tmp_path: Path, *, count: int = 1) -> Repo:
    repo = Repo(root=tmp_path / "repo")
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one", count=count)
    return repo


def _no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any parse, validation or planning fail the test: only a stored plan can answer."""

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the repository was loaded again")

    monkeypatch.setattr(revisions, "load_revision", refuse)  # the pipeline imports it on a miss


def test_a_new_process_takes_the_stored_plan_of_unchanged_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path)
    root = repo.write()
    first = load_plan(root, cluster=repo.cluster, store=PlanCache(tmp_path / "plans"))
    assert len(list((tmp_path / "plans").glob("*.plan"))) == 1

    _no_parsing(monkeypatch)
    again = load_plan(root, cluster=repo.cluster, store=PlanCache(tmp_path / "plans"))  # as a new process would
    assert again == first and again is not first


def test_changed_content_is_planned_again_and_both_are_kept(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    store = PlanCache(tmp_path / "plans")
    before = load_plan(repo.write(), cluster=repo.cluster, store=store)
    repo.claim_template("ml", "one", count=2)
    root = repo.write()
    after = load_plan(root, cluster=repo.cluster, store=store)
    assert after == load_plan(root, cluster=repo.cluster), "the stored plan is what a fresh load makes"
    assert after != before
    counts = [
        d.obj["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"]
        for d in after.objects
        if d.ref.name == "one"
    ]
    assert counts == [2]
    assert len(list((tmp_path / "plans").glob("*.plan"))) == 2


def test_the_key_names_content_cluster_revision_and_code() -> None:
    keys = {
        PlanCache.key(digest=b"d", cluster="c", revision="r", code=b"x"),
        PlanCache.key(digest=b"e", cluster="c", revision="r", code=b"x"),
        PlanCache.key(digest=b"d", cluster="c2", revision="r", code=b"x"),
        PlanCache.key(digest=b"d", cluster="c", revision="r2", code=b"x"),
        PlanCache.key(digest=b"d", cluster="c", revision="r", code=b"y"),
        PlanCache.key(digest=b"d", cluster="c", revision="r", code=b"x"),
    }
    assert len(keys) == 5
    assert PlanCache.key(digest=b"ab", cluster="c", revision="r", code=b"") != PlanCache.key(
        digest=b"a", cluster="bc", revision="r", code=b""
    ), "parts are length-prefixed: moving bytes between them changes the key"


def test_fleets_code_is_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another fleet (an upgrade, an edited checkout) never takes this one's plans."""
    repo = _repo(tmp_path)
    root = repo.write()
    load_plan(root, cluster=repo.cluster, store=PlanCache(tmp_path / "plans"))
    monkeypatch.setattr(plancaches, "code_fingerprint", lambda: b"another fleet")
    calls: list[object] = []
    real = revisions.load_revision
    monkeypatch.setattr(revisions, "load_revision", lambda *a, **k: calls.append(a) or real(*a, **k))
    load_plan(root, cluster=repo.cluster, store=PlanCache(tmp_path / "plans"))
    assert len(calls) == 1, "planned again"


def test_a_corrupt_entry_is_a_miss_and_is_removed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    root = repo.write()
    store = PlanCache(tmp_path / "plans")
    plan = load_plan(root, cluster=repo.cluster, store=store)
    (entry,) = (tmp_path / "plans").glob("*.plan")
    entry.write_bytes(entry.read_bytes()[:100])  # a writer killed mid-write would leave a temporary file; this is worse
    assert store.get(entry.stem) is None
    assert not entry.exists()
    assert load_plan(root, cluster=repo.cluster, store=store) == plan

    entry.write_bytes(pickle.dumps({"not": "a plan"}))
    assert store.get(entry.stem) is None


def test_a_directory_others_may_write_is_not_used(tmp_path: Path) -> None:
    """pickle runs code as it loads: an entry someone else could have written is never read."""
    repo = _repo(tmp_path)
    root = repo.write()
    store = PlanCache(tmp_path / "plans")
    load_plan(root, cluster=repo.cluster, store=store)
    (entry,) = (tmp_path / "plans").glob("*.plan")
    os.chmod(tmp_path / "plans", 0o777)
    assert store.get(entry.stem) is None
    assert not store.put("other", load_plan(root, cluster=repo.cluster))
    os.chmod(tmp_path / "plans", 0o700)
    assert store.get(entry.stem) is not None


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_an_entry_owned_by_another_user_is_not_read(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    store = PlanCache(tmp_path / "plans")
    load_plan(repo.write(), cluster=repo.cluster, store=store)
    (entry,) = (tmp_path / "plans").glob("*.plan")
    os.chown(entry, 65534, 65534)
    assert store.get(entry.stem) is None


def test_an_unwritable_directory_costs_nothing_but_time(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    root = repo.write()
    (tmp_path / "file").write_text("")
    store = PlanCache(tmp_path / "file" / "plans")  # cannot be created
    assert load_plan(root, cluster=repo.cluster, store=store) == load_plan(root, cluster=repo.cluster)


def test_only_the_newest_entries_are_kept(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    plan = load_plan(repo.write(), cluster=repo.cluster)
    store = PlanCache(tmp_path / "plans", keep=2)
    for n, key in enumerate(("a", "b", "c")):
        assert store.put(key, plan)
        os.utime(tmp_path / "plans" / f"{key}.plan", ns=(n * 10**9, n * 10**9))
    assert store.get("a") is None and store.get("c") is not None
    assert sorted(p.stem for p in (tmp_path / "plans").glob("*.plan")) == ["b", "c"]


def test_a_revision_that_fails_validation_is_not_stored(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    repo.files["teams/ml/bad.yaml"] = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {}\n"
    checked = check_and_plan(repo.write(), cluster=repo.cluster, store=PlanCache(tmp_path / "plans"))
    assert checked.plan is None and checked.findings
    assert not list((tmp_path / "plans").glob("*.plan"))


def test_where_the_cache_lives(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("FLEET_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert plancaches.directory() == tmp_path / "xdg" / "fleet" / "plans"
    monkeypatch.setenv("FLEET_CACHE_DIR", str(tmp_path / "f"))
    assert plancaches.directory() == tmp_path / "f" / "plans"
    assert plancaches.directory(str(tmp_path / "g")) == tmp_path / "g" / "plans"
    monkeypatch.setenv("FLEET_CACHE_DIR", "")
    assert plancaches.directory() is None
    assert plancaches.directory("") is None


def test_a_process_taking_a_stored_plan_does_not_import_the_models(tmp_path: Path) -> None:
    """What makes a stored plan worth having in a short-lived command: ``fleetctl diff`` of 2,000
    objects took 0.87 s with one, 0.61 s once the models, the policy checks, the CEL runtime and
    the tracing SDK were left unimported (docs/benchmarks.md). Planning afresh imports them."""
    repo = _repo(tmp_path)
    root = repo.write()
    probe = (
        "import sys; from pathlib import Path; import fleetctl.commands.diff; "
        "from fleet.engine import pipelines, plancaches; "
        "pipelines.load_plan(Path(sys.argv[1]), cluster=sys.argv[2], store=plancaches.PlanCache(Path(sys.argv[3]))); "
        "print(' '.join(m for m in sys.argv[4:] if m in sys.modules))"
    )
    heavy = ["pydantic", "fleet.manifests.kinds", "fleet.policy", "fleet.engine.renders", "cel_expr_python"]
    heavy += ["opentelemetry.sdk.trace", "pygments", "git"]  # GitPython: the controller's source only
    heavy += ["importlib.metadata"]  # the key's library versions are read from the dist-info names

    def imported() -> list[str]:
        argv = [sys.executable, "-c", probe, str(root), repo.cluster, str(tmp_path / "plans"), *heavy]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()

    assert imported()[:4] == heavy[:4], "planning afresh needs the models, checks and renderer"
    assert imported() == [], "a stored plan needs none of them"


def test_a_diff_planned_afresh_imports_only_what_it_uses(tmp_path: Path) -> None:
    """A fresh ``fleetctl diff`` pays for every module it imports before it can answer (issue 38):
    the device inventory (and its tables) only when the cluster declares pools, and never the git
    hosts' clients, the sandbox, the controller or the tracing SDK and its exporters (no endpoint
    configured)."""
    repo = _repo(tmp_path)
    probe = (
        "import sys; from pathlib import Path; from fleetctl import cli; cli.build_parser(['diff']); "
        "from fleet.engine import pipelines; "
        "pipelines.load_plan(Path(sys.argv[1]), cluster=sys.argv[2]); "
        "print(' '.join(m for m in sys.argv[3:] if m in sys.modules))"
    )
    never = ["fleet.hosts", "fleet.sandbox", "fleet.controller", "opentelemetry.sdk", "opentelemetry.exporter"]
    watched = ["fleet.inventory", *never]

    def imported() -> list[str]:
        argv = [sys.executable, "-c", probe, str(repo.write()), repo.cluster, *watched]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        return subprocess.run(argv, capture_output=True, text=True, check=True, env=env).stdout.split()

    assert imported() == [], "a cluster without pools: no inventory"
    repo.pool("h100", selector={"pool": "h100"}, labels={"gpu": "h100"})
    assert imported() == ["fleet.inventory"], "declared pools: the inventory checks what fits on them"
