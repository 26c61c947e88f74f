"""A 50,000-file repository (issue 11, item 5) through the git source and the controller.

1. 50,000 files beside a small fleet (a monorepo's assets): fetched, checked out, loaded and
   applied; the fetch, the load and the memory are measured and printed (docs/reliability.md).
2. A commit making them 50,000 YAML files: over the loader's 20,000-file limit, refused with
   a finding (``file-too-large``), and the last good revision stays enforced.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from fleet import kube
from fleet.engine import pipelines
from fleet.sandbox import Sandbox
from fleet.source import GitSource
from tests import waits
from tests.apply.repos import Repo
from tests.controller.conftest import Remote, running
from tests.controller.test_loop import _condition_at, _ready_at

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio, pytest.mark.slow, pytest.mark.usefixtures("fleetsync_crd")]

FILES = 50_000


def _mib(kib: int) -> float:
    return kib / 1024


async def test_a_50000_file_repository_is_followed_and_50000_yaml_files_are_refused(
    sandbox: Sandbox, remote: Remote, admin_client: kube.Client, tmp_path: Path
) -> None:
    repo = Repo(root=tmp_path / "unused")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.claim_template("ml", "single-gpu")

    def assets(work: Path) -> None:
        for i in range(FILES):
            folder = work / "assets" / f"{i // 1000:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i:05d}.txt").write_text(f"asset {i}\n")

    started = time.monotonic()
    good = remote.push(repo, message="50,000 asset files beside the fleet", edit=assets)
    print(f"\ncommit of {FILES} files written and pushed in {time.monotonic() - started:.1f} s")

    # The source and the loader alone, measured: a fresh cache (the first fetch is the largest).
    source = GitSource(url=remote.url, ref="main", path="", cache_dir=tmp_path / "measure", timeout=300)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    checkout = await source.sync()
    fetched = time.monotonic() - t0
    t0 = time.monotonic()
    checked = await anyio.to_thread.run_sync(
        lambda: pipelines.check_and_plan(checkout.path, cluster=repo.cluster, revision=checkout.revision)
    )
    loaded = time.monotonic() - t0
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    git_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert checkout.revision == good and checked.plan is not None and not checked.findings
    assert sum(1 for _ in (checkout.path / "assets").rglob("*.txt")) == FILES
    print(
        f"fetch + checkout {fetched:.1f} s, load + validate + plan {loaded:.2f} s; "
        f"peak RSS of the test process {_mib(rss_before):.0f} -> {_mib(rss_after):.0f} MiB, "
        f"largest git child {_mib(git_rss):.0f} MiB"
    )

    async with running(
        sandbox, remote, cluster=repo.cluster, cache_dir=tmp_path / "cache", interval=1.0, health_timeout=30.0
    ) as ctl:
        t0 = time.monotonic()
        await waits.eventually(
            lambda: _ready_at(admin_client, repo.cluster, good), within=300, what="Ready at the 50,000-file commit"
        )
        print(f"controller: Ready at the 50,000-file commit {time.monotonic() - t0:.1f} s after it started")

        def yaml_everywhere(work: Path) -> None:
            for path in sorted((work / "assets").rglob("*.txt")):
                path.rename(path.with_suffix(".yaml"))

        bad = remote.push(repo, message="the assets as 50,000 YAML files", edit=yaml_everywhere)
        t0 = time.monotonic()
        stalled: dict[str, Any] = await waits.eventually(
            lambda: _condition_at(admin_client, repo.cluster, "Stalled", "True", attempted=bad),
            within=300,
            what="Stalled at the 50,000-YAML-file commit",
        )
        print(f"controller: refused the 50,000-YAML-file commit {time.monotonic() - t0:.1f} s after the push")
        status = stalled["status"]
        assert [f["rule"] for f in status["findings"]] == ["file-too-large"], status["findings"]
        assert "more than 20000 YAML files" in status["findings"][0]["message"]
        assert status["enforcedRevision"] == good and status["lastAppliedRevision"] == good
        peak = _mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        print(f"peak RSS after the controller's two revisions: {peak:.0f} MiB")
        assert ctl.stats.fetch_errors == 0
