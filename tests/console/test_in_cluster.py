"""The console in fleet-controller, as people use it: log in through Gitea in Debian's Chromium.

A real ``fleet-controller`` process (``tests.controller.replicas``) follows a fleet repository on
the sandbox's Gitea with ``--console oidc``, Gitea being the OpenID provider; two teams run a GPU
pod each. People log in through Gitea's real login form: the admin (group ``fleet-admins``, bound
to ``view``) walks every page; alice (``ml-research-admins``) sees her team and not the other
team's pods; a page follows a ``kubectl`` change without a reload; logging out ends the session;
a ServiceAccount's bearer token reads the JSON. The Revision page lists the commits the controller
fetched and shows what each changes, as ``fleetctl diff -o markdown`` says it; a viewer who may not
get the FleetSync is refused it.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from selenium.common.exceptions import NoAlertPresentException, UnexpectedAlertPresentException
from selenium.webdriver.common.by import By

from fleet.sandbox import Sandbox, forges, identities
from fleetctl import cli
from tests import browsers
from tests.apply.repos import Repo
from tests.changes.test_holds import closed_window
from tests.conftest import Kubectl, gpu_pod
from tests.console import walks
from tests.controller.conftest import Remote, git
from tests.controller.replicas import Replicas
from tests.forge.conftest import Server, fleetsync_crd, gitea
from tests.markdowns import details, parse, sections, tables
from tests.waits import wait_for

__all__ = ["fleetsync_crd", "gitea"]

T = TypeVar("T")
pytestmark = [pytest.mark.extras("gitea"), pytest.mark.browser, pytest.mark.sandbox]

TEAMS = {"ml": "ml-research-admins", "inf": "inference-oncall"}
"""fleet team → its owner group, the Gitea organization of alice (ml) and bob (inf)."""


@dataclass
class Running:
    base: str
    """The console's URL: http://127.0.0.1:PORT/ui"""
    repo: Repo
    remote: Remote
    forge: forges.Forge
    passwords: dict[str, str]
    replicas: Replicas


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rbac(repo: Repo) -> str:
    """What a platform team binds for the console: fleet-level reads for everyone logged in, ``view``
    in each team's namespaces for its group, and ``view`` everywhere for the admins."""
    items: list[dict[str, object]] = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"console-{repo.id}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "fleet-console-viewer"},
            "subjects": [
                {"kind": "Group", "name": g, "apiGroup": "rbac.authorization.k8s.io"}
                for g in (*TEAMS.values(), identities.ADMINS)
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"console-admins-{repo.id}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "Group", "name": identities.ADMINS, "apiGroup": "rbac.authorization.k8s.io"}],
        },
    ]
    for team, group in TEAMS.items():
        for ns in repo.teams[team].namespaces:
            items.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": "console-view", "namespace": ns},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                    "subjects": [{"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"}],
                }
            )
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


@pytest.fixture(scope="module")
def running(
    sandbox: Sandbox, kubectl: Kubectl, gitea: Server, fleetsync_crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("console")
    port = free_port()
    base = f"http://127.0.0.1:{port}/ui"
    forge = gitea.forge
    passwords = identities.provision(forge)
    client = identities.register(forge, redirect_uris=(f"{base}/login/callback",))
    secret = root / "client-secret"
    secret.write_text(client.client_secret)
    repo = Repo(root=root / "unused")
    repo.cluster_spec = {"maintenance": closed_window()}  # a disruptive change waits (the last test)
    for team, group in TEAMS.items():
        repo.team(team, namespaces=[team], group=group, quota=4)
        repo.claim_template(team, "single-gpu")
    remote = Remote(root / "git")
    remote.push(repo, message="two teams")
    kubectl("apply", "-f", str(walks.paths.ROOT / "overlays" / "console" / "viewer-role.yaml"))
    replicas = Replicas(sandbox, remote, repo.cluster, root)
    replicas.start(
        "ctl", "--no-leader-elect", f"--listen=127.0.0.1:{port}", "--console=oidc",
        f"--console-oidc-issuer={client.issuer}", f"--console-oidc-client-id={client.client_id}",
        f"--console-oidc-client-secret-file={secret}", f"--console-url={base}",
    )  # fmt: skip
    try:
        wait_for(
            lambda: kubectl("get", "fleetsync", repo.cluster, "-o", "jsonpath={.status.conditions[0].status}",
                            check=False).stdout == "True",
            what="the controller to apply the repository", within=120,
        )  # fmt: skip
        kubectl("apply", "-f", "-", stdin=rbac(repo))
        for team, pod in (("ml", "trainer"), ("inf", "server")):
            gpu_pod(kubectl, repo.teams[team].namespaces[0], name=pod, template="single-gpu")
        for team in TEAMS:
            kubectl("wait", "--for=condition=Ready", "pod", "--all", "-n", repo.teams[team].namespaces[0],
                    "--timeout=120s")  # fmt: skip
        yield Running(base=base, repo=repo, remote=remote, forge=forge, passwords=passwords, replicas=replicas)
    finally:
        replicas.kill("ctl")
        for team in TEAMS:
            kubectl("delete", "pods", "--all", "-n", repo.teams[team].namespaces[0], "--force", "--grace-period=0",
                    check=False)  # fmt: skip


def dismissed(browser: browsers.Browser) -> bool:
    """True once no alert is open: Gitea built from its Go module has no front-end bundle, and its
    pages say so in an alert; its login form is plain HTML and works without it."""
    with contextlib.suppress(NoAlertPresentException):
        browser.driver.switch_to.alert.accept()
    return True


def calmly(browser: browsers.Browser, step: Callable[[], T]) -> T:
    """``step``, again after accepting an alert that Gitea's page raised meanwhile (at most five times)."""
    for _ in range(5):
        try:
            return step()
        except UnexpectedAlertPresentException:
            dismissed(browser)
    return step()


def submit(browser: browsers.Browser, user: str, password: str) -> None:
    """Fill in and send Gitea's login form, where the browser shows it."""
    form = browser.driver.find_elements(By.NAME, "user_name")
    if form:
        form[0].clear()
        form[0].send_keys(user)
        secret = browser.driver.find_element(By.NAME, "password")
        secret.clear()
        secret.send_keys(password)
        secret.submit()


def log_in(browser: browsers.Browser, running: Running, user: str) -> None:
    """Log ``user`` in through Gitea's real form, starting from the console's 401 page."""
    browser.driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    browser.open(f"{running.base}/")
    assert "Not logged in" in walks.text(browser)
    browser.driver.find_element(By.LINK_TEXT, "Log in").click()
    wait_for(
        lambda: dismissed(browser) and browser.driver.find_elements(By.NAME, "user_name"), what="Gitea's login form"
    )
    home = f"{running.base}/"
    for _ in range(3):  # an alert of Gitea's page may swallow a keystroke or the click: then again
        if calmly(browser, lambda: browser.driver.current_url) == home:
            break
        calmly(browser, lambda: submit(browser, user, running.passwords[user]))
        grant = calmly(browser, lambda: browser.driver.find_elements(By.ID, "authorize-app"))
        if grant:
            calmly(browser, grant[0].click)
        with contextlib.suppress(AssertionError):
            wait_for(
                lambda: calmly(browser, lambda: browser.driver.current_url) == home, what="the fleet page", within=20
            )
    assert calmly(browser, lambda: browser.driver.current_url) == home, browser.driver.current_url
    assert user in browser.driver.find_element(By.CSS_SELECTOR, ".who").text
    browser.log()  # what Gitea's pages and the first 401 logged is not the console's


def test_the_admin_walks_every_page(
    browser: browsers.Browser, running: Running, kubectl: Kubectl, tmp_path: Path
) -> None:
    log_in(browser, running, forges.ADMIN)
    held = walks.held_by_node(kubectl, [ns for t in running.repo.teams.values() for ns in t.namespaces])
    ml = running.repo.teams["ml"].namespaces[0]
    (ml_node,) = [node for claim, node in held.items() if claim.startswith(f"{ml}/")]
    seen = walks.walk(
        browser, running.base, cluster=running.repo.cluster, team="ml", node=ml_node,
        folder=walks.shots(tmp_path), prefix="console",
    )  # fmt: skip
    assert running.repo.cluster in seen["fleet"] and "Ready" in seen["fleet"]
    # the figures kubectl gives: each held device on its node's page, with its claim and pod
    for claim, node in held.items():
        browser.open(f"{running.base}/clusters/{running.repo.cluster}/gpus/{node}")
        assert claim in walks.text(browser), claim
    assert "trainer" in seen["node"]
    used = kubectl("get", "resourcequota", "-n", ml, "-o", "jsonpath={.items[0].status.used}").stdout
    count = json.loads(used)[f"{running.repo.device_class_name}.deviceclass.resource.k8s.io/devices"]
    assert f"{running.repo.device_class_name} {count} 4" in seen["team"], seen["team"]


def test_a_team_member_sees_their_team_and_not_the_others_pods(
    browser: browsers.Browser, running: Running, kubectl: Kubectl
) -> None:
    log_in(browser, running, "alice")
    ml, inf = running.repo.teams["ml"].namespaces[0], running.repo.teams["inf"].namespaces[0]
    held = walks.held_by_node(kubectl, [ml, inf])
    (ml_node,) = [node for claim, node in held.items() if claim.startswith(f"{ml}/")]
    (inf_node,) = [node for claim, node in held.items() if claim.startswith(f"{inf}/")]
    browser.open(f"{running.base}/clusters/{running.repo.cluster}/gpus/{ml_node}")
    assert "trainer" in walks.text(browser), "alice's own team's pod"
    browser.open(f"{running.base}/clusters/{running.repo.cluster}/gpus/{inf_node}")
    other = walks.text(browser)
    assert "server" not in other and inf not in other and "a claim you may not see" in other
    browser.open(f"{running.base}/clusters/{running.repo.cluster}/teams")
    teams = walks.text(browser)
    assert "ml" in teams and running.repo.teams["inf"].namespaces[0] not in teams
    browser.open(f"{running.base}/clusters/{running.repo.cluster}/teams/inf")
    assert "Not found" in walks.text(browser)


def test_a_page_follows_the_cluster_without_a_reload(
    browser: browsers.Browser, running: Running, kubectl: Kubectl
) -> None:
    log_in(browser, running, "alice")
    browser.open(f"{running.base}/clusters/{running.repo.cluster}/teams/ml")
    assert "Devices allocated: 1." in walks.text(browser)
    browser.driver.execute_script("window.stillThisPage = true")
    ns = running.repo.teams["ml"].namespaces[0]
    gpu_pod(kubectl, ns, name="second", template="single-gpu")
    wait_for(lambda: "Devices allocated: 2." in walks.text(browser), what="the team page to count the new pod")
    assert browser.driver.execute_script("return window.stillThisPage === true"), "the page was reloaded"
    kubectl("delete", "pod", "second", "-n", ns, "--force", "--grace-period=0")


def test_logging_out_ends_the_session(browser: browsers.Browser, running: Running) -> None:
    log_in(browser, running, "bob")
    browser.driver.find_element(By.CSS_SELECTOR, ".who button").click()
    wait_for(lambda: "Logged out" in walks.text(browser), what="the logged-out page")
    browser.open(f"{running.base}/")
    assert "Not logged in" in walks.text(browser)


def test_bearer_tokens_read_as_their_service_account(running: Running, kubectl: Kubectl) -> None:
    ns = running.repo.teams["ml"].namespaces[0]
    kubectl("create", "serviceaccount", "reader", "-n", ns, check=False)
    kubectl("create", "rolebinding", "reader-view", "-n", ns, "--clusterrole=view", f"--serviceaccount={ns}:reader",
            check=False)  # fmt: skip
    kubectl("create", "clusterrolebinding", f"reader-{ns}", "--clusterrole=fleet-console-viewer",
            f"--serviceaccount={ns}:reader", check=False)  # fmt: skip
    token = kubectl("create", "token", "reader", "-n", ns).stdout.strip()
    with httpx.Client(timeout=30) as http:
        gpus = http.get(
            f"{running.base}/clusters/{running.repo.cluster}/gpus?o=json", headers={"authorization": f"Bearer {token}"}
        )
        assert gpus.status_code == 200
        by_pod = {p: d["claim"] for d in gpus.json()["devices"] for p in d["pods"]}
        assert "trainer" in by_pod and "server" not in by_pod
        refused = http.get(f"{running.base}/?o=json", headers={"authorization": "Bearer not-a-token"})
        assert refused.status_code == 401 and "error" in refused.json()
        kubectl("create", "serviceaccount", "nobody", "-n", ns, check=False)
        nobody = {"authorization": f"Bearer {kubectl('create', 'token', 'nobody', '-n', ns).stdout.strip()}"}
        for path in ("/", f"/clusters/{running.repo.cluster}", f"/clusters/{running.repo.cluster}/gpus"):
            refused = http.get(f"{running.base}{path}", headers=nobody)
            assert refused.status_code == 403 and "fleet-console-viewer" in refused.text, path
        http.cookies.set("fleet_console", "e30=.forged.sig")
        forged = http.get(f"{running.base}/")
        assert forged.status_code == 401 and "Traceback" not in forged.text


def fleetctl_diff(running: Running, sha: str, *, base: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``fleetctl diff -o markdown`` in a checkout of ``sha``, against ``base`` (the page's: the first parent)."""
    work = running.remote.work
    git(work, "checkout", "-q", "--detach", sha)
    try:
        cli.run(["diff", str(work), "--cluster", running.repo.cluster, "-o", "markdown", "--base", base])
    finally:
        git(work, "checkout", "-q", "main")
    return capsys.readouterr().out


def key_lines(markdown: str, cluster: str) -> tuple[str, list[list[str]], list[str]]:
    """The title, the stage table and the changed objects' summaries of one cluster's comment."""
    tokens = parse(markdown)
    mine = sections(tokens)[cluster]
    title = next(line for line in markdown.splitlines() if line.startswith("**fleet diff**"))
    return title, tables(mine)[0], [opening for opening, _ in details(mine)]


def test_the_revision_page_shows_what_each_fetched_commit_changes(
    browser: browsers.Browser,
    running: Running,
    kubectl: Kubectl,
    sandbox: Sandbox,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(sandbox.kubeconfig))
    monkeypatch.setenv("NO_COLOR", "1")
    repo, cluster = running.repo, running.repo.cluster
    first = git(running.remote.work, "rev-parse", "HEAD")
    repo.claim_template("inf", "two-gpus", count=2)
    second = running.remote.push(repo, message="inference: a two-GPU template")
    wait_for(
        lambda: kubectl("get", "fleetsync", cluster, "-o", "jsonpath={.status.lastAppliedRevision}",
                        check=False).stdout == second,
        what="the controller to apply the second commit", within=120,
    )  # fmt: skip
    log_in(browser, running, forges.ADMIN)
    browser.open(f"{running.base}/revisions")
    listed = walks.text(browser)
    assert "inference: a two-GPU template" in listed and "two teams" in listed, listed
    assert browsers.serious(browsers.axe(browser.driver)) == []
    browser.screenshot(walks.shots(tmp_path) / "console-revisions.png")

    expected = {
        sha: fleetctl_diff(running, sha, base=base, capsys=capsys) for sha, base in ((second, first), (first, ""))
    }
    for sha in (second, first):
        browser.open(f"{running.base}/revisions/{sha}")
        wait_for(lambda: browser.driver.find_elements(By.CSS_SELECTOR, "main h1"), what="the revision page")
        assert browsers.serious(browsers.axe(browser.driver)) == [], sha
        errors = [entry for entry in browser.log() if entry.get("level") == "SEVERE"]
        assert errors == [], errors
        browser.screenshot(walks.shots(tmp_path) / f"console-revision-{sha[:7]}.png")
        with httpx.Client(timeout=300, cookies=browser_cookies(browser)) as http:
            answer = http.get(f"{running.base}/revisions/{sha}", params={"o": "json"})
        assert answer.status_code == 200, answer.text
        [shown] = answer.json()["clusters"]
        assert shown["error"] == "", shown
        title, stages, changed = key_lines(expected[sha], cluster)
        assert key_lines(shown["markdown"], cluster) == (title, stages, changed), sha
        text = walks.text(browser)
        for row in stages[1:]:
            assert " ".join(row) in text, row
    with httpx.Client(timeout=60, cookies=browser_cookies(browser)) as http:
        unknown = http.get(f"{running.base}/revisions/{'0' * 40}", params={"o": "json"})
    assert unknown.status_code == 404 and "has not fetched" in unknown.json()["error"], unknown.text
    # The first commit lacks the second's template: applying it would delete that template.
    title, stages, changed = key_lines(expected[first], cluster)
    assert "changes" in title and any(f"{repo.teams['inf'].namespaces[0]}/two-gpus" in c for c in changed), changed
    assert "no changes" in key_lines(expected[second], cluster)[0], "the controller applied the second commit"


def browser_cookies(browser: browsers.Browser) -> dict[str, str]:
    return {c["name"]: c["value"] for c in browser.driver.get_cookies()}


def test_a_viewer_who_may_not_get_the_fleetsync_is_refused_the_revision_page(
    running: Running, kubectl: Kubectl
) -> None:
    ns = running.repo.teams["inf"].namespaces[0]
    kubectl("create", "serviceaccount", "onlyview", "-n", ns, check=False)
    kubectl("create", "rolebinding", "onlyview-view", "-n", ns, "--clusterrole=view",
            f"--serviceaccount={ns}:onlyview", check=False)  # fmt: skip
    token = kubectl("create", "token", "onlyview", "-n", ns).stdout.strip()
    head = git(running.remote.work, "rev-parse", "HEAD")
    with httpx.Client(timeout=60, headers={"authorization": f"Bearer {token}"}) as http:
        for path in ("/revisions", f"/revisions/{head}"):
            refused = http.get(f"{running.base}{path}")
            assert refused.status_code == 403, (path, refused.status_code)
            assert "FleetSync" in refused.text and "Traceback" not in refused.text
        teams = http.get(f"{running.base}/clusters/{running.repo.cluster}/teams")
        assert teams.status_code == 200 and ns in teams.text, "what the viewer may see stays open"
        missing = http.get(f"{running.base}/revisions/{'0' * 40}", params={"o": "json"})
        assert missing.status_code == 403, "refused before the revision is looked up"


def test_a_held_change_shows_with_when_its_window_opens(
    browser: browsers.Browser, running: Running, kubectl: Kubectl
) -> None:
    """Last in the module: it leaves a change held. Removing a template a running pod uses is
    disruptive, and the cluster's maintenance window is closed: the fleet page says what waits and
    until when, as the FleetSync does."""
    del running.repo.claims["ml/single-gpu"]
    running.remote.push(running.repo, message="ml: drop single-gpu")

    def waiting() -> list[dict[str, object]]:
        got = kubectl("get", "fleetsync", running.repo.cluster, "-o", "jsonpath={.status.waiting}", check=False)
        return list(json.loads(got.stdout or "[]"))

    (held,) = wait_for(waiting, what="the controller to hold the template's removal", within=120)
    log_in(browser, running, forges.ADMIN)
    wait_for(lambda: "single-gpu" in walks.text(browser), what="the fleet page to show the held change", within=60)
    fleet = walks.text(browser)
    assert "Waiting" in fleet and str(held["until"]) in fleet and str(held["reason"]) in fleet
    browser.open(f"{running.base}/clusters/{running.repo.cluster}")
    assert str(held["reason"]) in walks.text(browser)
