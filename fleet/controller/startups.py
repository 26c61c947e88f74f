"""What the settings cannot check: the place the controller runs in, checked once at start.

Valid settings can still meet a pod that cannot hold them: a state directory that is not
writable (a read-only root filesystem without the Deployment's ``emptyDir``), or a pod
whose ServiceAccount token or CA is missing or unreadable (``automountServiceAccountToken:
false``, a projected volume's ``defaultMode`` that the pod's user cannot read). Found later,
each would surface as a traceback from wherever the file is first touched (helm's in-cluster
kubeconfig was the first), or as a misleading "cannot use the kubeconfig". ``check`` finds
them before anything starts and raises ``StartError``: what, where, the fix; the entry point
prints it and exits 2, as for invalid settings.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from fleet.controller.settings import Settings, env_var, flag
from fleet.errors import FleetError

TOKEN_HINT = (
    "mount the pod's ServiceAccount token there (automountServiceAccountToken: true, as in "
    "overlays/base/controller.yaml, or a projected serviceAccountToken volume), point {dir_flag} at "
    "the directory holding it, or give --kubeconfig"
)


class StartError(FleetError):
    """The controller cannot run where it was started; exit 2."""


def check(config: Settings, *, environ: dict[str, str] | None = None) -> None:
    """Raise ``StartError`` if the state directory is not writable, or if this is a pod (``KUBERNETES_SERVICE_HOST``,
    no kubeconfig given) whose service account token or CA cannot be read."""
    env = os.environ if environ is None else environ
    writable(config.state_dir)
    if config.kubeconfig is not None or not env.get("KUBERNETES_SERVICE_HOST"):
        return
    account = config.service_account_dir
    token = account / "token"
    dir_flag = f"{flag('service_account_dir')} / {env_var('service_account_dir')}"
    if not token.exists():
        if env.get("KUBECONFIG"):
            return  # a pod given a kubeconfig instead of its token (connect() falls back to it, like kubectl)
        raise StartError(
            "no service account token in this pod",
            where=f"{token} (KUBERNETES_SERVICE_HOST is set)",
            hint=TOKEN_HINT.format(dir_flag=dir_flag),
        )
    try:
        with token.open("rb") as file:
            file.read(1)
    except OSError as err:
        raise StartError(
            f"cannot read the service account token: {err.strerror or err}",
            where=str(token),
            hint=f"make it readable by uid {os.getuid()} (the volume's defaultMode, or the pod's fsGroup), "
            f"or point {dir_flag} at a readable copy",
        ) from None
    ca = account / "ca.crt"
    try:
        ssl.create_default_context(cafile=str(ca))
    except ssl.SSLError:
        raise StartError(
            "the API server's CA is not a PEM certificate",
            where=str(ca),
            hint="mount the cluster's CA there as PEM (kube-root-ca.crt's ca.crt), or point "
            f"{dir_flag} at a directory with token and ca.crt",
        ) from None
    except OSError as err:
        problem = err.strerror or str(err)
        raise StartError(
            f"cannot read the API server's CA: {problem}",
            where=str(ca),
            hint="the CA (PEM) is mounted beside the token (kube-root-ca.crt in a projected volume): make it "
            f"readable by uid {os.getuid()} and a PEM certificate, or point {dir_flag} at a directory with "
            "token and ca.crt",
        ) from None


def writable(directory: Path) -> None:
    """Create ``directory`` if needed and write a file in it, or raise ``StartError``."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory, prefix=".fleet-write-check-"):
            pass
    except OSError as err:
        raise StartError(
            f"the state directory is not writable: {err.strerror or err}",
            where=f"{directory} ({flag('state_dir')} / {env_var('state_dir')})",
            hint="mount a writable volume there (the Deployment's emptyDir 'cache' at /var/cache/fleet) or set "
            f"{env_var('state_dir')} to a writable directory: it holds the git checkout, plans and helm's files",
        ) from None


__all__ = ["StartError", "check", "writable"]
