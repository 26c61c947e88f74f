"""Debian's Prometheus and promtool, driven by the monitoring tests.

Both come from Debian's ``prometheus`` package, which ``./dev setup`` installs (as root). Where
it is not installed a test skips, naming the package; on CI (``CI`` set) it fails instead,
because there ``./dev setup`` must have installed it.

``check_rules``, ``run_rule_tests`` (``promtool test rules``) and ``check_metrics`` run
promtool and raise ``PromtoolError`` with promtool's own output when it refuses.
``running(...)`` starts a real Prometheus on a free loopback port with a temporary
configuration (scrape and evaluation every second) and stops it afterwards; ``query`` and
``api`` ask its HTTP API.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.sandbox.processes import free_port
from tests import processes, waits

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "overlays" / "monitoring"
RULES = MONITORING / "fleet.rules.yaml"
DASHBOARD = MONITORING / "fleet-dashboard.json"


class PromtoolError(Exception):
    """promtool refused its input; the message is what promtool printed."""


def binary(name: str) -> Path:
    found = shutil.which(name)
    if found:
        return Path(found)
    reason = f"{name} is not installed: Debian's package `prometheus` has it (./dev setup installs it as root)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def promtool(*args: str, stdin: str | None = None) -> str:
    """promtool's output; ``PromtoolError`` with that output when it exits non-zero."""
    run = subprocess.run(
        [str(binary("promtool")), *args], input=stdin, capture_output=True, text=True, timeout=120, check=False
    )
    if run.returncode != 0:
        raise PromtoolError(f"promtool {' '.join(args)} exited {run.returncode}:\n{run.stdout}{run.stderr}")
    return run.stdout + run.stderr


def check_rules(*paths: Path) -> str:
    return promtool("check", "rules", *map(str, paths))


def run_rule_tests(*paths: Path) -> str:
    return promtool("test", "rules", *map(str, paths))


def check_metrics(text: str) -> str:
    return promtool("check", "metrics", stdin=text)


@contextlib.contextmanager
def running(*, directory: Path, targets: list[str], rule_files: list[Path]) -> Iterator[str]:
    """A Prometheus scraping ``targets`` (job ``fleet``) every second with ``rule_files``; its URL."""
    prometheus = binary("prometheus")
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [{"job_name": "fleet", "static_configs": [{"targets": targets}]}],
    }
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = directory / "prometheus.log"
    argv = [
        str(prometheus),
        f"--config.file={directory / 'prometheus.yml'}",
        f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            assert proc.poll() is None, f"prometheus exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            return _ready(url)

        waits.wait_for(ready, within=60, what="prometheus ready", details=lambda: log.read_text()[-3000:])
        yield url
    finally:
        processes.stop(proc)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def api(url: str, path: str, **params: str) -> Any:
    """``data`` of a Prometheus HTTP API answer (``status`` must be ``success``)."""
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"{url}/api/v1/{path}{query}", timeout=10) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", answer
    return answer["data"]


def query(url: str, expr: str) -> list[dict[str, Any]]:
    """The instant vector ``expr`` gives now (``resultType`` vector or scalar as one sample)."""
    data = api(url, "query", query=expr)
    if data["resultType"] == "scalar":
        return [{"metric": {}, "value": data["result"]}]
    result: list[dict[str, Any]] = data["result"]
    return result
