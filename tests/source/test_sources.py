"""GitSource against real repositories: ``file://`` and the real ``git daemon`` on loopback."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fleet.manifests import Limits, TreeCache, read_tree
from fleet.source import GitSource, PathNotFound, RefNotFound, SourceError, TooLarge, Unreachable, sources
from fleet.telemetry import tracing
from tests.source.gitservers import Upstream, daemon, git

pytestmark = pytest.mark.anyio


def source(url: str, cache_dir: Path, **kw: object) -> GitSource:
    options: dict[str, object] = {"ref": "main", "path": "fleet", "timeout": 30.0, **kw}
    return GitSource(url=url, cache_dir=cache_dir, **options)  # type: ignore[arg-type]


def listed(directory: Path, pattern: str) -> list[Path]:
    return list(directory.glob(pattern))


async def test_first_sync_checks_out_the_commit_and_path(upstream: Upstream, cache_dir: Path) -> None:
    sha = git("rev-parse", "HEAD", cwd=upstream.work)
    checkout = await source(upstream.url, cache_dir).sync()
    assert checkout.revision == sha
    assert len(checkout.revision) == 40
    assert checkout.path == cache_dir / "checkouts" / sha / "fleet"
    assert (checkout.path / "fleet.yaml").read_text() == "kind: Fleet\n"
    assert checkout.fetched_at > 0


async def test_new_commit_gets_a_new_directory_and_old_ones_are_kept_up_to_keep(
    upstream: Upstream, cache_dir: Path
) -> None:
    src = source(upstream.url, cache_dir, keep=2)
    first = await src.sync()
    second_sha = upstream.commit({"fleet/fleet.yaml": "kind: Fleet\n# 2\n"})
    second = await src.sync()
    assert second.revision == second_sha != first.revision
    assert (second.path / "fleet.yaml").read_text().endswith("# 2\n")
    assert (first.path / "fleet.yaml").read_text() == "kind: Fleet\n", "an older checkout does not change"
    upstream.commit({"fleet/fleet.yaml": "kind: Fleet\n# 3\n"})
    third = await src.sync()
    assert third.path.exists() and second.path.exists()
    assert not first.path.exists(), "only the newest `keep` checkouts stay"


async def test_a_fleet_emergency_trailer_is_read_with_the_commits_author(upstream: Upstream, cache_dir: Path) -> None:
    src = source(upstream.url, cache_dir)
    first = await src.sync()
    assert first.emergency == ""
    assert first.author.endswith(">")
    upstream.commit(
        {"fleet/fleet.yaml": "kind: Fleet\n# fix\n"},
        message="Driver 580.65.07 for CVE-2026-1234\n\nBody.\n\nFleet-Emergency: CVE-2026-1234 in the driver\n",
    )
    urgent = await src.sync()
    assert urgent.emergency == "CVE-2026-1234 in the driver"
    assert urgent.author == first.author
    upstream.commit({"fleet/fleet.yaml": "kind: Fleet\n# later\n"}, message="Fleet-Emergency: not a trailer alone")
    assert (await src.sync()).emergency == "", "a subject line is not a trailer"


async def test_unchanged_remote_answers_the_same_revision(upstream: Upstream, cache_dir: Path) -> None:
    src = source(upstream.url, cache_dir)
    assert (await src.sync()).revision == (await src.sync()).revision


async def test_fetch_is_shallow(upstream: Upstream, cache_dir: Path) -> None:
    for i in range(3):
        upstream.commit({"fleet/n.yaml": f"n: {i}\n"})
    await source(upstream.url, cache_dir).sync()
    repos = list((cache_dir / "repos").iterdir())
    count = git("--git-dir", str(repos[0]), "rev-list", "--count", sources.TARGET, cwd=cache_dir)
    assert count == "1"


async def test_force_pushed_branch_is_followed(upstream: Upstream, cache_dir: Path) -> None:
    src = source(upstream.url, cache_dir)
    upstream.commit({"fleet/a.yaml": "a: 1\n"})
    before = await src.sync()
    after_sha = upstream.rewrite({"fleet/a.yaml": "a: rewritten\n"})
    assert git("--git-dir", str(upstream.bare), "cat-file", "-t", before.revision, cwd=upstream.root, check=False) == ""
    after = await src.sync()
    assert after.revision == after_sha != before.revision
    assert (after.path / "a.yaml").read_text() == "a: rewritten\n"


async def test_remote_head_tags_and_full_refs(upstream: Upstream, cache_dir: Path) -> None:
    head = git("rev-parse", "HEAD", cwd=upstream.work)
    upstream.tag("v1")
    upstream.commit({"fleet/b.yaml": "b: 1\n"}, branch="other")
    assert (await source(upstream.url, cache_dir / "a", ref=None).sync()).revision == head
    assert (await source(upstream.url, cache_dir / "b", ref="v1").sync()).revision == head
    other = git("rev-parse", "refs/heads/other", cwd=upstream.bare)
    assert (await source(upstream.url, cache_dir / "c", ref="refs/heads/other").sync()).revision == other


async def test_root_path(upstream: Upstream, cache_dir: Path) -> None:
    checkout = await source(upstream.url, cache_dir, path="").sync()
    assert (checkout.path / "README.md").exists()
    assert checkout.path.name == checkout.revision


async def test_symlinks_are_checked_out_as_plain_files(upstream: Upstream, cache_dir: Path) -> None:
    os.symlink("/etc/hostname", upstream.work / "fleet" / "link.yaml")
    upstream.commit({})
    checkout = await source(upstream.url, cache_dir).sync()
    link = checkout.path / "link.yaml"
    assert not link.is_symlink()
    assert link.read_text() == "/etc/hostname"


async def test_missing_ref(upstream: Upstream, cache_dir: Path) -> None:
    with pytest.raises(RefNotFound) as caught:
        await source(upstream.url, cache_dir, ref="nope").sync()
    assert caught.value.where == upstream.url
    assert "'nope'" in caught.value.what and caught.value.hint


async def test_missing_path(upstream: Upstream, cache_dir: Path) -> None:
    with pytest.raises(PathNotFound) as caught:
        await source(upstream.url, cache_dir, path="elsewhere").sync()
    assert "'elsewhere'" in caught.value.what


def test_option_like_urls_and_refs_are_refused(cache_dir: Path) -> None:
    with pytest.raises(SourceError, match="starts with '-'"):
        GitSource(url="--upload-pack=touch /tmp/pwned", ref=None, path="", cache_dir=cache_dir)
    for bad in ("--upload-pack=x", "main:refs/heads/x", "a..b", "", "a b"):
        with pytest.raises(SourceError, match="not a branch or tag name"):
            GitSource(url="file:///x", ref=bad, path="", cache_dir=cache_dir)


def test_path_must_stay_inside(cache_dir: Path) -> None:
    for bad in ("../x", "/abs"):
        with pytest.raises(SourceError):
            GitSource(url="file:///x", ref=None, path=bad, cache_dir=cache_dir)


async def test_not_a_repository(tmp_path: Path, cache_dir: Path) -> None:
    with pytest.raises(SourceError) as caught:
        await source(f"file://{tmp_path}/missing.git", cache_dir).sync()
    assert "git fetch failed" in caught.value.what


async def test_tree_over_max_bytes_is_refused_before_checkout(upstream: Upstream, cache_dir: Path) -> None:
    # Highly compressible: a small fetch whose tree is large (what max_bytes on the checkout is for).
    upstream.commit({"fleet/big.yaml": "x: " + "a" * 200_000 + "\n"})
    with pytest.raises(TooLarge) as caught:
        await source(upstream.url, cache_dir, max_bytes=100_000).sync()
    assert "over the limit of 100000" in caught.value.what
    assert not listed(cache_dir, "checkouts/*")


async def test_fetch_over_max_bytes_is_stopped(upstream: Upstream, cache_dir: Path) -> None:
    upstream.commit({"fleet/noise.bin": os.urandom(8 * 1024 * 1024)})
    with pytest.raises(TooLarge) as caught:
        await source(upstream.url, cache_dir, max_bytes=1024 * 1024).sync()
    assert "brought more than the limit of 1048576 bytes" in caught.value.what
    assert not listed(cache_dir, "repos/*"), "what is over the limit is not kept"
    assert not listed(cache_dir, "checkouts/*")


async def test_git_daemon(upstream: Upstream, cache_dir: Path) -> None:
    with daemon(base=upstream.root) as port:
        src = source(f"git://127.0.0.1:{port}/repo.git", cache_dir)
        first = await src.sync()
        assert first.revision == git("rev-parse", "HEAD", cwd=upstream.work)
        sha = upstream.rewrite({"fleet/fleet.yaml": "kind: Fleet\n# rewritten\n"})
        assert (await src.sync()).revision == sha


async def test_unreachable_remote(cache_dir: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Unreachable) as caught:
        await source(f"git://127.0.0.1:{port}/repo.git", cache_dir).sync()
    assert caught.value.where == f"git://127.0.0.1:{port}/repo.git"


def _silent_server() -> tuple[socket.socket, threading.Event]:
    """A TCP server that accepts and never answers: git hangs until its deadline."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue
        for conn in held:
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    return listener, stop


def _git_children() -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if "git" in line and "fetch" in line and "ps -eo" not in line]


async def test_hanging_remote_times_out_and_git_is_killed(cache_dir: Path) -> None:
    listener, stop = _silent_server()
    port = listener.getsockname()[1]
    try:
        with anyio.fail_after(20), pytest.raises(Unreachable) as caught:
            await source(f"git://127.0.0.1:{port}/repo.git", cache_dir, timeout=1.0).sync()
        assert "did not finish within 1 s" in caught.value.what
        assert not [p for p in _git_children() if str(port) in p]
    finally:
        stop.set()
        listener.close()


async def test_cancelled_sync_kills_git(cache_dir: Path) -> None:
    listener, stop = _silent_server()
    port = listener.getsockname()[1]
    try:
        with anyio.move_on_after(1.0) as scope:
            await source(f"git://127.0.0.1:{port}/repo.git", cache_dir, timeout=60.0).sync()
        assert scope.cancelled_caught
        assert not [p for p in _git_children() if str(port) in p], "cancelling left git running"
    finally:
        stop.set()
        listener.close()


async def test_concurrent_syncs_are_serialised(upstream: Upstream, cache_dir: Path) -> None:
    src = source(upstream.url, cache_dir)
    results: list[str] = []

    async def one() -> None:
        results.append((await src.sync()).revision)

    async with anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(one)
    assert len(set(results)) == 1 and len(results) == 4


def _break(cache_dir: Path, what: str) -> None:
    (git_dir,) = listed(cache_dir, "repos/*.git")
    if what == "lock":
        (git_dir / "refs" / "fleet" / "target.lock").write_text("")
        (git_dir / "shallow.lock").write_text("")
    elif what == "packs":
        for pack in git_dir.glob("objects/pack/*.pack"):
            pack.write_bytes(pack.read_bytes()[:40])
    else:
        (git_dir / "config").write_text("[core\n")


@pytest.mark.parametrize("damage", ["lock", "packs", "config"])
async def test_a_damaged_cache_repository_recovers(
    upstream: Upstream, cache_dir: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    src = source(upstream.url, cache_dir)
    await src.sync()
    _break(cache_dir, damage)
    sha = upstream.commit({"fleet/after.yaml": "x: 1\n"})
    checkout = await src.sync()
    assert checkout.revision == sha
    assert (checkout.path / "after.yaml").exists()
    assert (checkout.path / "fleet.yaml").read_text() == "kind: Fleet\n", "unchanged files come from the cache"
    recloned = "cloning afresh" in caplog.text
    assert recloned is (damage == "config"), "git itself copes with stale locks (removed) and lost packs (refetched)"


async def test_sync_is_one_git_fetch_span(upstream: Upstream, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "tracer", lambda: provider.get_tracer("fleet"))  # the global provider is set once
    checkout = await source(upstream.url, cache_dir).sync()
    with pytest.raises(RefNotFound):
        await source(upstream.url, cache_dir, ref="gone").sync()
    ok, failed = exporter.get_finished_spans()
    assert ok.name == failed.name == "git fetch"
    assert ok.attributes is not None and failed.attributes is not None
    assert ok.attributes[tracing.REVISION] == checkout.revision
    assert ok.attributes["vcs.repository.url.full"] == upstream.url
    assert failed.attributes["error.type"] == "ref-not-found"


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


async def test_recycled_checkout_is_exactly_the_new_commit(upstream: Upstream, cache_dir: Path) -> None:
    src = source(upstream.url, cache_dir, keep=1, path="")
    upstream.commit({"fleet/a.yaml": "a: 1\n", "fleet/b/c.yaml": "c: 1\n"})
    first = await src.sync()
    upstream.commit({"fleet/a.yaml": None, "fleet/b/c.yaml": "c: 2\n", "fleet/d.yaml": "d: 1\n"})
    second = await src.sync()
    assert not first.path.exists(), "the old revision's directory is gone, not showing another revision"
    expected = {name: (upstream.work / name).read_text() for name in git("ls-files", cwd=upstream.work).splitlines()}
    assert _tree(second.path) == expected


async def test_a_recycled_checkout_is_read_again_only_for_the_files_the_commit_changed(
    upstream: Upstream, cache_dir: Path
) -> None:
    # What the controller relies on for a fast commit: the recycled directory keeps the inode and
    # stat of every file the commit did not change, and the TreeCache knows them by that.
    src = source(upstream.url, cache_dir, keep=1, path="")
    upstream.commit({f"fleet/t{i}.yaml": f"n: {i}\n" for i in range(20)})
    first = await src.sync()
    await anyio.sleep(TreeCache.RACY_SECONDS + 0.1)  # older than the racy window when read
    cache = TreeCache()
    cache.begin(now=time.time())
    before, _ = read_tree(first.path, limits=Limits(), cache=cache)
    upstream.commit({"fleet/t3.yaml": "n: changed\n"})
    second = await src.sync()
    assert second.path != first.path and not first.path.exists()
    cache.begin(now=time.time())
    files, _ = read_tree(second.path, limits=Limits(), cache=cache)
    assert (cache.reads, cache.reused) == (len(before) + 1, len(before) - 1), "one file read, the rest reused"
    assert files["fleet/t3.yaml"] == b"n: changed\n" and files["fleet/t4.yaml"] == b"n: 4\n"


async def test_collect_prepares_spares_that_new_revisions_take_instead_of_writing_every_file(
    upstream: Upstream, cache_dir: Path
) -> None:
    src = source(upstream.url, cache_dir, keep=3, path="")
    upstream.commit({f"fleet/t{i}.yaml": f"n: {i}\n" for i in range(20)})
    first = await src.sync(collect=False)
    for _ in range(3):  # one spare per call, until keep directories exist
        await src.collect()
    checkouts = cache_dir / "checkouts"
    assert sorted(p.name for p in checkouts.glob("spare-*")) == ["spare-0", "spare-1"]
    unchanged = (checkouts / "spare-0" / "fleet" / "t4.yaml").stat().st_ino

    upstream.commit({"fleet/t3.yaml": "n: changed\n", "fleet/t5.yaml": None})
    second = await src.sync(collect=False)
    assert sorted(p.name for p in checkouts.glob("spare-*")) == ["spare-1"], "spare-0 became the new revision"
    assert (second.path / "fleet" / "t4.yaml").stat().st_ino == unchanged, "only what differs was written"
    expected = {name: (upstream.work / name).read_text() for name in git("ls-files", cwd=upstream.work).splitlines()}
    assert _tree(second.path) == expected, "exactly the new commit"
    assert _tree(first.path) != expected and first.path.exists(), "the previous revision is kept as it was"
    await src.collect()
    assert sorted(p.name for p in checkouts.glob("spare-*")) == ["spare-1"], "2 revisions + 1 spare = keep"


async def test_collect_without_a_cache_repository_does_nothing(upstream: Upstream, cache_dir: Path) -> None:
    # A fetch over the size limit removes the cache repository while the checkouts stay.
    src = source(upstream.url, cache_dir, keep=3, path="")
    await src.sync(collect=False)
    shutil.rmtree(cache_dir / "repos")
    await src.collect()
    assert not list((cache_dir / "checkouts").glob("spare-*"))


async def test_packs_are_collected_and_old_history_dropped(
    upstream: Upstream, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "PACK_LIMIT", 2)
    src = source(upstream.url, cache_dir)
    first = await src.sync()
    for n in range(4):
        upstream.commit({"fleet/n.yaml": f"n: {n}\n"})
        await src.sync()
    (git_dir,) = listed(cache_dir, "repos/*.git")
    assert len(listed(git_dir, "objects/pack/*.pack")) <= 2
    assert not has_object(git_dir, first.revision), "a commit no longer followed is dropped"


async def test_a_sync_without_collect_leaves_the_repack_to_collect(
    upstream: Upstream, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The controller's way: the checkout first, the repack after the revision is queued.
    monkeypatch.setattr(sources, "PACK_LIMIT", 2)
    src = source(upstream.url, cache_dir)
    first = await src.sync(collect=False)
    for n in range(4):
        upstream.commit({"fleet/n.yaml": f"n: {n}\n"})
        await src.sync(collect=False)
    (git_dir,) = listed(cache_dir, "repos/*.git")
    assert len(listed(git_dir, "objects/pack/*.pack")) > 2, "nothing repacked during the syncs"
    await src.collect()
    assert len(listed(git_dir, "objects/pack/*.pack")) <= 2
    assert not has_object(git_dir, first.revision)


def has_object(git_dir: Path, sha: str) -> bool:
    probe = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "-e", sha], capture_output=True, check=False)
    return probe.returncode == 0


async def test_each_sync_says_which_files_changed_since_the_one_before(upstream: Upstream, cache_dir: Path) -> None:
    src = source(upstream.url, cache_dir)  # path "fleet": names are relative to it, others left out
    upstream.commit({"fleet/a.yaml": "a: 1\n", "fleet/t/b.yaml": "b: 1\n"})
    first = await src.sync()
    assert first.changed is None, "nothing to compare the first checkout with"
    upstream.commit({"fleet/a.yaml": None, "fleet/t/b.yaml": "b: 2\n", "fleet/t/c.yaml": "c: 1\n", "README.md": "x\n"})
    second = await src.sync()
    assert second.changed == sources.Changed(since=first.revision, paths=frozenset({"a.yaml", "t/b.yaml", "t/c.yaml"}))
    again = await src.sync()
    assert again.revision == second.revision
    assert again.changed == sources.Changed(since=second.revision, paths=frozenset())


async def test_changed_is_none_when_the_earlier_commit_is_gone(upstream: Upstream, cache_dir: Path) -> None:
    src = source(upstream.url, cache_dir)
    upstream.commit({"fleet/a.yaml": "a: 1\n"})
    await src.sync()
    upstream.commit({"fleet/a.yaml": "a: 2\n"})
    src._last = "0" * 40  # as after a repack dropped the commit before (shallow history, rewritten)
    second = await src.sync()
    assert second.changed is None, "git could not compare: the reader reads the whole tree"
