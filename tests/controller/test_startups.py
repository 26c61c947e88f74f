"""Start-up in a place the controller cannot run: one error line, one hint, exit 2, no traceback.

The entry point runs as a process, as a pod starts it; the same checks inside the image, as
uid 65532 on a read-only root, are in tests/install/test_image.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import certifi
import pytest

from fleet.controller import settings, startups

REQUIRED = {"FLEET_REPO": "file:///srv/fleet.git", "FLEET_CLUSTER": "gpu-east"}


def start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "KUBE"))}
    return subprocess.run(
        [sys.executable, "-m", "fleet.controller"],
        env={**clean, **REQUIRED, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def account(tmp_path: Path, *, token: bool = True, ca: bytes | None = None) -> Path:
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    if token:
        (directory / "token").write_text("t0ken")
    (directory / "ca.crt").write_bytes(Path(certifi.where()).read_bytes() if ca is None else ca)
    return directory


@pytest.mark.parametrize(
    ("case", "first_line", "hint"),
    [
        (
            "state directory under a file",
            "{tmp}/file/state (--state-dir / FLEET_STATE_DIR): the state directory is not writable: Not a directory",
            "mount a writable volume there (the Deployment's emptyDir 'cache' at /var/cache/fleet)",
        ),
        (
            "no token",
            "{tmp}/serviceaccount/token (KUBERNETES_SERVICE_HOST is set): no service account token in this pod",
            "automountServiceAccountToken: true",
        ),
        (
            "a CA that is no certificate",
            "{tmp}/serviceaccount/ca.crt: the API server's CA is not a PEM certificate",
            "mount the cluster's CA there as PEM",
        ),
        (
            "no CA",
            "{tmp}/serviceaccount/ca.crt: cannot read the API server's CA: No such file or directory",
            f"make it readable by uid {os.getuid()}",
        ),
    ],
)
def test_a_place_the_controller_cannot_run_in_is_one_line_and_a_hint(
    tmp_path: Path, case: str, first_line: str, hint: str
) -> None:
    (tmp_path / "file").write_text("not a directory")
    env = {"FLEET_STATE_DIR": str(tmp_path / "state"), "KUBERNETES_SERVICE_HOST": "127.0.0.1"}
    if case == "state directory under a file":
        env["FLEET_STATE_DIR"] = str(tmp_path / "file" / "state")
        env["FLEET_SERVICE_ACCOUNT_DIR"] = str(account(tmp_path))
    elif case == "no token":
        env["FLEET_SERVICE_ACCOUNT_DIR"] = str(account(tmp_path, token=False))
    elif case == "a CA that is no certificate":
        env["FLEET_SERVICE_ACCOUNT_DIR"] = str(account(tmp_path, ca=b"-----BEGIN CERTIFICATE-----\nnot base64\n"))
    else:
        directory = account(tmp_path)
        (directory / "ca.crt").unlink()
        env["FLEET_SERVICE_ACCOUNT_DIR"] = str(directory)
    proc = start(env)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    assert lines[0] == "error: " + first_line.format(tmp=tmp_path)
    assert lines[1].startswith("  hint: ") and hint in lines[1], lines[1]


def test_a_usable_place_passes_and_a_pod_with_a_kubeconfig_needs_no_token(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [n for n in os.environ if n.startswith("FLEET_")]:
        monkeypatch.delenv(name)
    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    ready = settings.parse(["--state-dir", str(tmp_path / "a" / "b"), "--service-account-dir", str(account(tmp_path))])
    startups.check(ready, environ=pod)
    assert (tmp_path / "a" / "b").is_dir() and not list((tmp_path / "a" / "b").iterdir())  # created, left empty

    tokenless = settings.parse(["--state-dir", str(tmp_path / "s"), "--service-account-dir", str(tmp_path / "none")])
    with pytest.raises(startups.StartError, match="no service account token"):
        startups.check(tokenless, environ=pod)
    startups.check(tokenless, environ={**pod, "KUBECONFIG": "/etc/fleet/kubeconfig"})  # connect() falls back to it
    startups.check(tokenless, environ={})  # not a pod: the kubeconfig, like kubectl
    given = settings.parse(["--state-dir", str(tmp_path / "s"), "--kubeconfig", "/k", "--service-account-dir", "/no"])
    startups.check(given, environ=pod)
