"""The Revision page against the sandbox: the comment ``fleetctl diff -o markdown`` prints, from the same code path.

A real git repository with two commits (a team, then its claim templates, one carrying a
script in an annotation), served by the console app of ``fleetctl console --repo`` on
loopback: ``/revisions/<sha>`` holds exactly the markdown ``fleetctl diff -o markdown`` prints
in a checkout of that commit, its objects and counts on the page, the script as text; an
unknown revision is a 404 naming it; ``/revisions`` lists both commits; a second view of the
page makes no second diff; and axe finds nothing serious on it in Chromium.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from fleet.console import apps, logins, revisions, sources
from fleet.sandbox import Sandbox
from fleetctl import cli
from fleetctl.commands import console
from tests import browsers
from tests.apply.repos import Repo
from tests.markdowns import details, parse, sections, tables

pytestmark = pytest.mark.sandbox

SCRIPT = "<script>alert(1)</script>"


def git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


@dataclass
class Served:
    url: str
    key: str
    repo: Repo
    shas: list[str]
    commits: revisions.CheckoutRevisions


@pytest.fixture()
def served(sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    repo = Repo(root=tmp_path / "repo")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.write()
    git(repo.root, "init", "-q", "-b", "main")
    git(repo.root, "add", ".")
    git(repo.root, "commit", "-qm", "a team")
    repo.claim_template("ml", "one-gpu")
    repo.claim_template("ml", "two-gpus", count=2)
    repo.files["teams/ml/noted.yaml"] = f"""\
        apiVersion: resource.k8s.io/v1
        kind: ResourceClaimTemplate
        metadata:
          name: noted
          namespace: {repo.ns("ml")}
          annotations: {{note: "{SCRIPT}"}}
        spec:
          spec:
            devices:
              requests:
              - name: gpu
                exactly: {{deviceClassName: {repo.device_class_name}}}
        """
    repo.write()
    git(repo.root, "add", ".")
    git(repo.root, "commit", "-qm", "its claim templates")
    shas = git(repo.root, "log", "--format=%H").split()
    context = str(yaml.safe_load(sandbox.kubeconfig.read_text())["current-context"])
    shown = [(repo.cluster, context)]
    args = argparse.Namespace(repo=repo.root, kubeconfig=None)
    commits = revisions.CheckoutRevisions(repo.root, settings=console.diff_settings(args, shown))
    login = logins.LocalLogin(user="tester")
    app, _ = apps.build(source=sources.ApiSource(shown, kubeconfig=None), login=login, revisions=commits)
    with browsers.serve(app) as url:
        yield Served(url, login.key, repo, shas, commits)


@contextlib.contextmanager
def opened(url: str, key: str, *, timeout: float) -> Iterator[httpx.Client]:
    """An HTTP client whose session the printed key opened (the key's answer is a redirect without it)."""
    with httpx.Client(base_url=url, timeout=timeout) as http:
        assert http.get("/", params={"key": key}).status_code == 303
        yield http


def cli_markdown(repo: Repo, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.run(["diff", str(repo.root), "--cluster", repo.cluster, "-o", "markdown"]) == 1
    return capsys.readouterr().out


def test_the_page_is_the_comment_fleetctl_diff_prints(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    head = served.shas[0]
    with opened(served.url, served.key, timeout=300) as http:
        answer = http.get(f"/revisions/{head[:10]}", params={"o": "json"})
        assert answer.status_code == 200, answer.text
        got = answer.json()
        assert got["sha"] == head
        [one] = got["clusters"]
        assert one["cluster"] == served.repo.cluster and one["error"] == ""
        expected = cli_markdown(served.repo, capsys)
        assert one["markdown"] == expected, "the page's comment is fleetctl diff -o markdown's, byte for byte"

        page = http.get(f"/revisions/{head}")
        assert page.status_code == 200
        assert served.commits.diffs == 1, "the second view reads the kept comment"
    mine = sections(parse(expected))[served.repo.cluster]
    stages = tables(mine)[0]
    created = sum(int(row[1]) for row in stages[1:])
    assert created >= 3 and len(details(mine)) == created
    text = page.text
    assert text.count("<details>") == created
    for name in ("one-gpu", "two-gpus", "noted"):
        assert f"ResourceClaimTemplate {served.repo.ns('ml')}/{name}</code>" in text, name
    for row in stages[1:]:
        assert f"<td>{row[0]}</td>" in text and f'<td class="align-right">{row[1]}</td>' in text
    assert SCRIPT not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text, "the annotation shows as text"
    assert 'href="/revisions"' in text, "the Revisions link in the top nav"


def test_a_revision_that_does_not_validate_shows_its_findings(served: Served) -> None:
    served.repo.files["teams/ml/broken.yaml"] = "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q}\n"
    served.repo.write()
    git(served.repo.root, "add", ".")
    git(served.repo.root, "commit", "-qm", "a quota fleet does not accept")
    with opened(served.url, served.key, timeout=300) as http:
        page = http.get("/revisions/HEAD", params={"o": "json"})
    [one] = page.json()["clusters"]
    assert "does not validate" in one["markdown"] and "### Findings" in one["markdown"], one
    assert "errors" in one["markdown"].splitlines()[1], "the title says errors, as fleetctl diff's exit 2"


def test_unknown_revisions_and_the_list(served: Served) -> None:
    with opened(served.url, served.key, timeout=60) as http:
        unknown = http.get("/revisions/0123456789abcdef")
        assert unknown.status_code == 404
        assert "No such revision" in unknown.text and "0123456789abcdef" in unknown.text
        assert http.get("/revisions/--output=x").status_code == 404, "never read as an option"
        listed = http.get("/revisions")
        assert listed.status_code == 200
        for sha in served.shas:
            assert f'href="/revisions/{sha}"' in listed.text
        assert "its claim templates" in listed.text and "a team" in listed.text
        form = http.get("/revisions", params={"rev": "main"}, follow_redirects=False)
        assert form.status_code == 303 and form.headers["location"] == "/revisions/main"
    assert served.commits.diffs == 0, "neither the list nor an unknown revision diffs"


def test_without_a_repository_the_page_says_how_to_give_one() -> None:
    login = logins.LocalLogin(user="tester")
    app, _ = apps.build(source=sources.ApiSource([("c", "c")], kubeconfig=None), login=login)
    with browsers.serve(app) as url, opened(url, login.key, timeout=60) as http:
        for path in ("/revisions", "/revisions/main"):
            answer = http.get(path)
            assert answer.status_code == 404
            assert "fleetctl console --repo PATH" in answer.text
        assert 'href="/revisions"' not in http.get("/revisions").text, "no Revisions link without a repository"


@pytest.mark.browser
def test_the_page_has_no_serious_accessibility_violation(served: Served, browser: browsers.Browser) -> None:
    browser.open(f"{served.url}/revisions/{served.shas[0]}?key={served.key}")
    assert browsers.serious(browsers.axe(browser.driver)) == []
    browser.open(f"{served.url}/revisions")
    assert browsers.serious(browsers.axe(browser.driver)) == []
