"""Every error path of every command, as users meet it: the real ``fleetctl`` binary in a subprocess.

For each command: an invalid revision, an unreachable cluster, a kubeconfig context
that does not exist, and Ctrl-C (SIGINT sent to the running process mid-run). Each
must print only the message and its hint — never a traceback — and exit with the
documented code: 1 findings, 2 error, 130 interrupted (as kubectl). An interrupted
command leaves nothing half-written: an interrupted apply has recorded in its ledger
every object it created; an interrupted ``sandbox up`` (or ``demo``) leaves no process
running. ``render``, ``sandbox`` and ``demo`` take no kubeconfig context, so only the
cases that apply to them are run.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet.engine import ledgers, ownership
from fleet.sandbox import Sandbox, clusters, credentials
from tests.apply.conftest import Engine
from tests.apply.repos import Repo

ROOT = Path(__file__).resolve().parents[2]
held: list[socket.socket] = []
EXAMPLE = ROOT / "examples" / "fleet"
FLEETCTL = Path(sys.executable).parent / "fleetctl"


def fleetctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FLEETCTL), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=dict(os.environ, NO_COLOR="1", **(env or {})),
    )


def interrupted(
    args: list[str],
    *,
    ready: str = "",
    after: float = 2.0,
    connected: socket.socket | None = None,
    cpu: float = 0.0,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Start fleetctl; once it used ``cpu`` seconds of CPU, or stderr shows ``ready``, or it ``connected``
    to that listener, or after ``after`` seconds, send SIGINT and collect what it printed."""
    proc = subprocess.Popen(
        [str(FLEETCTL), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, NO_COLOR="1", **(env or {})),
        # As a terminal's foreground job: a suite started in the background (`.ci/run &`) runs with
        # SIGINT ignored, which children inherit, and Python then installs no KeyboardInterrupt.
        preexec_fn=_default_sigint,
    )
    assert proc.stderr is not None
    seen = ""
    if cpu:
        # CPU time, not wall time: on a loaded machine the wall clock says nothing about how far it got.
        deadline = time.monotonic() + 120
        while cpu_seconds(proc.pid) < cpu and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
    elif connected is not None:
        connected.settimeout(120)
        held.append(connected.accept()[0])  # it waits for the TLS handshake now, and forever
    elif ready:
        deadline = time.monotonic() + 120
        while ready not in seen and time.monotonic() < deadline and proc.poll() is None:
            seen += proc.stderr.readline()
    else:
        time.sleep(after)
    assert proc.poll() is None, f"finished before the interrupt: {seen}"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, seen + err)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def assert_clean(run: subprocess.CompletedProcess[str], *, code: int, says: str) -> None:
    """Exit ``code``, ``says`` in the output, only the message and hint: no traceback."""
    text = run.stdout + run.stderr
    assert run.returncode == code, text[-3000:]
    assert "Traceback" not in text and "ExceptionGroup" not in text, text[-3000:]
    assert says in text, text[-3000:]


@dataclass
class Places:
    bad_repo: Path
    big_repo: Path
    dead: Path
    """A kubeconfig whose server refuses connections."""
    hanging: Path
    """A kubeconfig whose server accepts connections and never answers."""
    listener: socket.socket


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Places]:
    base = tmp_path_factory.mktemp("error-paths")
    bad = base / "bad"
    shutil.copytree(EXAMPLE, bad)
    template = bad / "teams" / "inference" / "single-gpu.yaml"
    template.write_text(
        template.read_text().replace("deviceClassName: gpu.nvidia.com", "deviceClassName: no-such-class.example.com")
    )
    big = base / "big"
    shutil.copytree(EXAMPLE, big)
    source = (big / "teams" / "ml-research" / "single-gpu.yaml").read_text()
    for i in range(4000):  # enough that validating and rendering run for seconds: a Ctrl-C lands mid-run
        (big / "teams" / "ml-research" / f"t{i}.yaml").write_text(source.replace("name: single-gpu", f"name: t{i}"))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)  # the kernel accepts; nobody ever answers the TLS handshake
    places = Places(
        bad_repo=bad,
        big_repo=big,
        dead=base / "dead.kubeconfig",
        hanging=base / "hanging.kubeconfig",
        listener=listener,
    )
    for path, port in ((places.dead, 1), (places.hanging, listener.getsockname()[1])):
        path.write_text(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n"
            f"  cluster: {{server: 'https://127.0.0.1:{port}'}}\n"
            "users:\n- name: u\n  user: {token: x}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\n"
            "current-context: c\n"
        )
    yield places
    for connection in held:
        connection.close()
    listener.close()


# -- an invalid revision ------------------------------------------------------------------------

INVALID = [
    ("validate", [], 1, "unknown-device-class"),
    ("render", ["--cluster", "gpu-east"], 2, "error: "),
]


@pytest.mark.parametrize(("command", "extra", "code", "says"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_revision(places: Places, tmp_path: Path, command: str, extra: list[str], code: int, says: str) -> None:
    args = [a.format(dead=places.dead) for a in extra]
    run = fleetctl(command, str(places.bad_repo), *args, env={"FLEET_SANDBOX_DIR": str(tmp_path / "sandbox")})
    assert_clean(run, code=code, says=says)
    assert "single-gpu.yaml:" in run.stdout + run.stderr, "the finding names the file and line"
    if command == "demo":
        assert not (tmp_path / "sandbox").exists(), "no cluster is started for an invalid repository"


@pytest.mark.sandbox
@pytest.mark.parametrize("command", ["diff", "apply"])
def test_invalid_revision_against_a_cluster(places: Places, sandbox: Sandbox, command: str) -> None:
    # The validation error must come out as itself, not as an ExceptionGroup of a task group;
    # and it comes before anything is written, fleet's own Lease included.
    def lease() -> str:
        got = sandbox.kubectl(
            "get",
            "lease",
            "fleet-gpu-east",
            "-n",
            "fleet-system",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
            check=False,
        )
        return got.stdout if got.returncode == 0 else "absent"

    before = lease()
    run = fleetctl(
        command,
        str(places.bad_repo),
        "--cluster",
        "gpu-east",
        "--kubeconfig",
        str(sandbox.kubeconfig),
        "--context",
        credentials.CLUSTER,
    )
    assert_clean(run, code=2, says="does not validate")
    assert run.stderr.startswith("error: "), run.stderr
    assert "single-gpu.yaml:13:" in run.stderr, "the finding names the file and line"
    assert lease() == before, "an invalid revision takes no Lease (writes nothing at all)"


# -- an unreachable cluster, a missing context -------------------------------------------------

CLUSTER_COMMANDS = [
    ("validate", [str(EXAMPLE), "--cluster", "gpu-east"]),
    ("diff", [str(EXAMPLE), "--cluster", "gpu-east", "--timeout", "3"]),
    ("apply", [str(EXAMPLE), "--cluster", "gpu-east", "--timeout", "3"]),
    ("inventory", []),
]


@pytest.mark.parametrize(("command", "args"), CLUSTER_COMMANDS, ids=[c[0] for c in CLUSTER_COMMANDS])
def test_unreachable_cluster(places: Places, command: str, args: list[str]) -> None:
    run = fleetctl(command, *args, "--kubeconfig", str(places.dead), "--context", "c")
    assert_clean(run, code=2, says="cannot reach the API server")
    assert "hint: check the server address" in run.stderr


@pytest.mark.parametrize(("command", "args"), CLUSTER_COMMANDS, ids=[c[0] for c in CLUSTER_COMMANDS])
def test_missing_context(places: Places, command: str, args: list[str]) -> None:
    run = fleetctl(command, *args, "--kubeconfig", str(places.dead), "--context", "no-such-context")
    assert_clean(run, code=2, says="No such context no-such-context")
    assert "hint: " in run.stderr


@pytest.mark.parametrize("command", ["validate", "render", "diff", "apply"])
def test_a_repository_path_that_does_not_exist_is_named_before_the_cluster(
    places: Places, tmp_path: Path, command: str
) -> None:
    """A mistyped path is the error to show, even when the kubeconfig is no good either."""
    cluster = [] if command == "render" else ["--kubeconfig", str(places.dead)]  # render reads no cluster
    run = fleetctl(command, str(tmp_path / "no-such-repo"), "--cluster", "gpu-east", *cluster)
    assert_clean(run, code=2, says=f"{tmp_path / 'no-such-repo'} is not a directory")
    assert "cannot reach" not in run.stderr and "context" not in run.stderr, run.stderr


def test_sandbox_env_without_a_sandbox(tmp_path: Path) -> None:
    run = fleetctl("sandbox", "--dir", str(tmp_path / "none"), "env")
    assert_clean(run, code=1, says="no sandbox is running")


# -- Ctrl-C -------------------------------------------------------------------------------------


def test_interrupt_while_rendering(places: Places) -> None:
    assert_clean(
        interrupted(["render", str(places.big_repo), "--cluster", "gpu-east"], cpu=0.5),
        code=130,
        says=": interrupted",
    )


def test_interrupt_while_validating(places: Places) -> None:
    # Past Python's start-up, while it imports the commands or loads the repository: both end alike.
    assert_clean(interrupted(["validate", str(places.big_repo)], cpu=0.5), code=130, says=": interrupted")


@pytest.mark.parametrize(("command", "args"), CLUSTER_COMMANDS, ids=[c[0] for c in CLUSTER_COMMANDS])
def test_interrupt_while_waiting_for_the_cluster(places: Places, command: str, args: list[str]) -> None:
    args = [a for a in args if a not in ("--timeout", "3")]
    run = interrupted(
        [command, *args, "--kubeconfig", str(places.hanging), "--context", "c"], connected=places.listener
    )
    assert_clean(run, code=130, says=f"fleetctl {command}: interrupted")
    assert run.stderr.strip().splitlines()[-1] == f"fleetctl {command}: interrupted"
    assert "did not answer" not in run.stderr, "an interrupt is not a timeout"


@pytest.mark.sandbox
def test_interrupted_apply_has_recorded_everything_it_created(sandbox: Sandbox, tmp_path: Path) -> None:
    repo = Repo(root=tmp_path / "repo")
    fleet = Engine(sandbox, repo)
    repo.team("ml", namespaces=["ml"], group="ml-research")
    repo.claim_template("ml", "one")
    # A pool whose nodes never appear: the apply waits at the pools gate, after writing three stages.
    repo.pool("ghost", selector={"sandbox.fleet.gpufleet.dev/pool": f"none-{repo.id}"}, labels={"a": "b"})
    path = str(repo.write())
    run = interrupted(
        [
            "apply",
            path,
            "--cluster",
            repo.cluster,
            "--kubeconfig",
            str(sandbox.kubeconfig),
            "--context",
            credentials.CLUSTER,
            "--health-timeout",
            "300",
        ],
        ready="tenancy:",
    )
    assert_clean(run, code=130, says="fleetctl apply: interrupted")

    async def recorded(client: object) -> tuple[ledgers.Ledger, list[str]]:
        from fleet import kube

        assert isinstance(client, kube.Client)
        ledger = await ledgers.load(client=client, cluster=repo.cluster)
        ours = []
        for api_version, kind in (
            ("v1", "Namespace"),
            ("rbac.authorization.k8s.io/v1", "Role"),
            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
            ("v1", "ResourceQuota"),
            ("resource.k8s.io/v1", "DeviceClass"),
        ):
            k = await client.kind(api_version=api_version, kind=kind)
            selector = f"{ownership.CLUSTER_LABEL}={repo.cluster}"
            ours += [kube.Ref.of(o).key for o in (await client.list(k, label_selector=selector)).items]
        return ledger, ours

    ledger, created = fleet.run(recorded)
    assert created, "the run wrote the first stages before the interrupt"
    assert set(created) <= set(ledger.entries), "every object the run created is in the ledger"
    assert not ledger.progress.complete
    assert {"namespaces", "classes", "tenancy"} <= set(ledger.progress.done), "the next run resumes at pools"


@pytest.mark.sandbox
def test_interrupted_sandbox_up_leaves_nothing_running(tmp_path: Path, sandbox: Sandbox) -> None:
    directory = tmp_path / "sb"
    run = interrupted(["sandbox", "--dir", str(directory), "up"], ready="etcd")
    assert_clean(run, code=130, says="fleetctl sandbox: interrupted")
    assert not clusters.status(directory=directory)["up"]
    assert clusters.Sandbox.load(directory) is None, "the half-started sandbox was stopped and removed"


@pytest.mark.sandbox
def test_forbidden_listing_is_one_message(sandbox: Sandbox) -> None:
    # alice may not list cluster-wide: the listing runs in a task group beside the loading,
    # and its Forbidden must come out as itself.
    run = fleetctl(
        "diff",
        str(EXAMPLE),
        "--cluster",
        "gpu-east",
        "--kubeconfig",
        str(sandbox.kubeconfig),
        "--context",
        f"alice@{credentials.CLUSTER}",
    )
    assert_clean(run, code=2, says="forbidden")
    assert run.stderr.startswith("error: ") and "hint: check the credentials" in run.stderr


@pytest.mark.sandbox
def test_interrupted_demo_stops_the_sandbox_it_was_starting(tmp_path: Path, sandbox: Sandbox) -> None:
    directory = tmp_path / "demo"
    run = interrupted(["demo"], ready="==> starting sandbox", env={"FLEET_SANDBOX_DIR": str(directory)})
    assert_clean(run, code=130, says="fleetctl demo: interrupted")
    assert clusters.Sandbox.load(directory) is None, "the half-started sandbox was stopped and removed"


@pytest.mark.parametrize(("command", "args"), CLUSTER_COMMANDS, ids=[c[0] for c in CLUSTER_COMMANDS])
def test_failing_exec_plugin(places: Places, tmp_path: Path, command: str, args: list[str]) -> None:
    kubeconfig = tmp_path / "exec.kubeconfig"
    kubeconfig.write_text(
        places.dead.read_text().replace(
            "user: {token: x}",
            'user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: "false"}}',
        )
    )
    run = fleetctl(command, *args, "--kubeconfig", str(kubeconfig), "--context", "c")
    assert_clean(run, code=2, says="cannot use the kubeconfig: Process exited with non-zero code 1")
    assert "hint: pass --kubeconfig FILE" in run.stderr
