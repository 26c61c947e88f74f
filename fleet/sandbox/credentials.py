"""Credentials of a sandbox: the service-account key, static user tokens and the kubeconfig.

The sandbox uses static bearer tokens (``--token-auth-file``) rather than client
certificates: they are one line each, need no CA of our own, and give RBAC tests
real non-admin identities. The apiserver generates its own self-signed serving
certificate into ``pki/``; the kubeconfig trusts exactly that certificate.

Users:
    admin  group system:masters          context ``fleet-sandbox`` (the current one)
    alice  groups ml-research, sandbox:users   context ``alice@fleet-sandbox``
    bob    groups inference, sandbox:users     context ``bob@fleet-sandbox``
alice and bob have no rights until something binds a Role to them or their group.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from ruamel.yaml import YAML

CLUSTER = "fleet-sandbox"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]

    @property
    def context(self) -> str:
        return CLUSTER if self.name == "admin" else f"{self.name}@{CLUSTER}"


USERS = (
    User("admin", ("system:masters",)),
    User("alice", ("ml-research", "sandbox:users")),
    User("bob", ("inference", "sandbox:users")),
)


def write_service_account_key(directory: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = directory / "sa.key", directory / "sa.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    private.chmod(0o600)
    return private, public


def write_tokens(directory: Path) -> dict[str, str]:
    """Write ``tokens.csv`` (token,user,uid,"groups") and return user → token."""
    tokens = {u.name: secrets.token_hex(16) for u in USERS}
    lines = [f'{tokens[u.name]},{u.name},{1000 + i},"{",".join(u.groups)}"' for i, u in enumerate(USERS)]
    path = directory / "tokens.csv"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return tokens


def write_kubeconfig(path: Path, *, server: str, ca_file: Path, tokens: dict[str, str]) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER, "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": u.name, "user": {"token": tokens[u.name]}} for u in USERS],
        "contexts": [{"name": u.context, "context": {"cluster": CLUSTER, "user": u.name}} for u in USERS],
        "current-context": CLUSTER,
    }
    with path.open("w") as fh:
        YAML(typ="safe", pure=True).dump(config, fh)
    path.chmod(0o600)


__all__ = ["CLUSTER", "USERS", "User", "write_kubeconfig", "write_service_account_key", "write_tokens"]
