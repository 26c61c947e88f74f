"""``kube.connect`` reading credentials: what goes wrong before any request is a clear error.

No cluster: the credentials (kr8s's ``KubeAuth``: contexts, exec plugins, certificate files) are
read before the first request, so a server address nothing listens on is enough.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from fleet import kube


def _kubeconfig(tmp_path: Path, user: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "https://127.0.0.1:1"}}
contexts:
- name: ctx
  context: {{cluster: c, user: u}}
current-context: ctx
users:
- name: u
  user: {user}
"""
    )
    return str(path)


def _exec(command: str, *args: str) -> str:
    return (
        '{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: "'
        + command
        + '", args: ['
        + ", ".join(f'"{a}"' for a in args)
        + "]}}"
    )


def _connect(kubeconfig: str, *, timeout: float = 10) -> kube.KubeError:
    async def main() -> None:
        await kube.connect(kubeconfig=kubeconfig, timeout=timeout)

    with pytest.raises(kube.KubeError) as raised:
        anyio.run(main)
    return raised.value


def test_an_exec_plugin_that_fails_is_named_with_its_output(tmp_path: Path) -> None:
    error = _connect(_kubeconfig(tmp_path, _exec(sys.executable, "-c", "import sys; sys.exit('token expired')")))
    assert "cannot use the kubeconfig" in error.what and "token expired" in error.what
    assert error.where.endswith("kubeconfig") and "--kubeconfig" in error.hint


def test_an_exec_plugin_that_is_missing_is_a_kubeconfig_error(tmp_path: Path) -> None:
    error = _connect(_kubeconfig(tmp_path, _exec(str(tmp_path / "no-such-plugin"))))
    assert "cannot use the kubeconfig" in error.what and "no-such-plugin" in error.what


def test_an_exec_plugin_that_hangs_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    hangs = _exec(sys.executable, "-c", "import threading; threading.Event().wait()")  # never returns
    error = _connect(_kubeconfig(tmp_path, hangs), timeout=1)
    assert error.what == "reading the credentials did not finish within 1s"
    assert "exec plugin" in error.hint


def test_a_client_certificate_file_that_is_missing_is_a_kubeconfig_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.crt"
    error = _connect(_kubeconfig(tmp_path, f'{{client-certificate: "{missing}", client-key: "{missing}"}}'))
    assert "cannot use the kubeconfig" in error.what and "missing.crt" in error.what


def test_a_server_nothing_listens_on_is_unreachable(tmp_path: Path) -> None:
    error = _connect(_kubeconfig(tmp_path, "{token: abc}"))
    assert isinstance(error, kube.Unreachable)
    assert "cannot reach the API server" in error.what


def test_a_kubeconfig_field_of_the_wrong_type_is_a_kubeconfig_error(tmp_path: Path) -> None:
    user = "{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: false}}"  # a YAML bool
    error = _connect(_kubeconfig(tmp_path, user))
    assert "cannot use the kubeconfig" in error.what and "bool" in error.what
