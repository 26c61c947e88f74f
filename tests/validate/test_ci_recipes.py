"""The CI recipes of docs/validate.md, taken from the page: they parse, run the commands meant, and
the GitLab job's ``comment`` keeps one note per marker.

GitLab's notes API cannot be reached from here, so ``comment`` runs (bash, curl, jq, as in the job)
against a loopback server standing in for it: a test double of the SaaS API that answers the four
calls the job makes (``GET /user``, ``GET``/``POST`` notes, ``PUT`` a note) as GitLab documents
them, and checks the token header on each.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from fleet.views import comments
from tests.manifests.repos import ROOT

TOKEN = "glpat-test"
PROJECT, MR = 7, 3


def recipes() -> list[Any]:
    text = (ROOT / "docs" / "validate.md").read_text()
    return [
        next(yaml.safe_load_all(block)) for block in re.findall(r"^```yaml\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    ]


def recipe(key: str) -> dict[str, Any]:
    return next(r for r in recipes() if isinstance(r, dict) and key in r)


def test_the_github_workflow_runs_markdown_and_comments_in_both_jobs() -> None:
    jobs = recipe("permissions")["jobs"]
    assert recipe("permissions")["permissions"]["pull-requests"] == "write"
    for name, command in (("validate", "fleetctl validate . -o markdown"), ("diff", "fleetctl diff . --cluster")):
        runs = [step.get("run", "") for step in jobs[name]["steps"]]
        assert any(command in run for run in runs), name
        (comment,) = [step for step in jobs[name]["steps"] if step.get("name") == "comment"]
        assert "--method PATCH" in comment["run"] and "head -n 1 comment.md" in comment["run"]
    assert "secrets.FLEET_CI_KUBECONFIG" in json.dumps(jobs["diff"]), "only the diff job has credentials"
    assert "secrets" not in json.dumps(jobs["validate"])


class Notes:
    """The merge request's notes as the fake GitLab holds them, and every request it was sent."""

    def __init__(self) -> None:
        self.notes: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []


@pytest.fixture
def gitlab() -> Iterator[tuple[str, Notes]]:
    state = Notes()
    base = f"/api/v4/projects/{PROJECT}/merge_requests/{MR}/notes"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _allowed(self) -> bool:
            state.requests.append((self.command, self.path))
            if self.headers.get("PRIVATE-TOKEN") != TOKEN:
                self._reply(401, {"message": "401 Unauthorized"})
                return False
            return True

        def do_GET(self) -> None:
            if not self._allowed():
                return
            url = urlparse(self.path)
            if url.path == "/api/v4/user":
                self._reply(200, {"id": 1, "username": "project_7_bot"})
            elif url.path == base:
                self._reply(200, state.notes)
            else:
                self._reply(404, {"message": "404 Not found"})

        def _body(self) -> str:
            length = int(self.headers.get("Content-Length", "0"))
            form = parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
            return form["body"][0]

        def do_POST(self) -> None:
            if not self._allowed():
                return
            if urlparse(self.path).path != base:
                self._reply(404, {"message": "404 Not found"})
                return
            note = {"id": len(state.notes) + 100, "author": {"username": "project_7_bot"}, "body": self._body()}
            state.notes.append(note)
            self._reply(201, note)

        def do_PUT(self) -> None:
            if not self._allowed():
                return
            found = [n for n in state.notes if urlparse(self.path).path == f"{base}/{n['id']}"]
            if not found:
                self._reply(404, {"message": "404 Not found"})
                return
            found[0]["body"] = self._body()
            self._reply(200, found[0])

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/api/v4", state
    finally:
        server.shutdown()
        server.server_close()


def test_the_gitlab_job_edits_its_own_note_in_place(gitlab: tuple[str, Notes], tmp_path: Path) -> None:
    url, state = gitlab
    missing = [tool for tool in ("curl", "jq") if shutil.which(tool) is None]
    assert not missing, f"the GitLab job needs {missing}: ./dev setup installs them"
    state.notes.append({"id": 1, "author": {"username": "alice"}, "body": f"{comments.DIFF_MARKER} quoted by a person"})
    function = recipe(".fleet")[".fleet"]["before_script"][-1]
    assert function.lstrip().startswith("comment()")
    environment = {
        "PATH": "/usr/bin:/bin",
        "CI_API_V4_URL": url,
        "CI_PROJECT_ID": str(PROJECT),
        "CI_MERGE_REQUEST_IID": str(MR),
        "FLEET_GITLAB_TOKEN": TOKEN,
    }

    def post(body: str) -> None:
        (tmp_path / "comment.md").write_text(body)
        subprocess.run(["bash", "-ec", f"{function}\ncomment"], cwd=tmp_path, env=environment, check=True, timeout=60)

    first = f"{comments.DIFF_MARKER}\n**fleet diff** (gpu-east: changes)\n\n| a & b | c=d+e |\n"
    post(first)
    assert state.notes[-1]["body"] == first, "sent form-encoded: &, |, + and = arrive as written"
    post(f"{comments.VALIDATE_MARKER}\n**fleet validate** ✅ validates\n")
    second = f"{comments.DIFF_MARKER}\n**fleet diff** (gpu-east: no changes)\n"
    post(second)
    bodies = {n["id"]: n["body"] for n in state.notes}
    assert bodies[1].endswith("quoted by a person"), "another author's note is never edited"
    assert sorted(b for i, b in bodies.items() if i != 1) == sorted(
        [second, f"{comments.VALIDATE_MARKER}\n**fleet validate** ✅ validates\n"]
    )
    writes = [method for method, _ in state.requests if method in ("POST", "PUT")]
    assert writes == ["POST", "POST", "PUT"], "a new note per marker once, then edited in place"
