"""The sandbox's people: Gitea as the OpenID provider the console logs in through, with users and groups.

The console maps a login to Kubernetes RBAC by the ID token's ``groups`` claim, and Gitea
1.27 fills that claim (scope ``groups``) with the name of every organization the user
belongs to and ``org:team`` for each of its teams there. So the sandbox's groups are
organizations named as fleet's teams name their owner groups (the example fleet's
``inference`` team is owned by ``inference-oncall``, ``ml-research`` by
``ml-research-admins``), and ``fleet-admins`` for the platform team:

    alice   ml-research-admins    (team member; in the kubeconfig, group ml-research)
    bob     inference-oncall      (team member; in the kubeconfig, group inference)
    fleet   fleet-admins          (the forge's admin)

Each organization is created owned by its one member (Gitea's admin API), so no one is in
another's group, not even the admin. ``provision`` creates the people with random passwords,
kept in ``people.json`` (mode 0600) beside the admin's token; ``register`` creates the
console's OAuth2 application (a confidential client, with the redirect URIs given; called
again, it replaces them and keeps the client) and keeps its id and secret in ``oidc.json``
(mode 0600). ``ISSUER`` rules are Gitea's: the issuer is ``ROOT_URL`` without its last slash.

The application skips Gitea's consent page once a user has granted it (``skip_secondary_authorization``);
the first login of each user still shows it, as a real first login does.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.sandbox import forges

ADMINS = "fleet-admins"
"""The organization, and so the group, of the platform team; the forge's admin is its member."""
CLIENT_NAME = "fleet-console"


@dataclass(frozen=True)
class Person:
    """A sandbox user and the organizations (groups) they belong to."""

    name: str
    orgs: tuple[str, ...]


PEOPLE = (
    Person("alice", ("ml-research-admins",)),
    Person("bob", ("inference-oncall",)),
    Person(forges.ADMIN, (ADMINS,)),
)


@dataclass(frozen=True)
class Client:
    """The console's registration with the forge: what ``fleet.console.oidc.Provider`` needs."""

    issuer: str
    client_id: str
    client_secret: str
    redirect_uris: tuple[str, ...]

    def __repr__(self) -> str:
        return f"Client(issuer={self.issuer!r}, client_id={self.client_id!r}, redirect_uris={self.redirect_uris!r})"


def issuer(forge: forges.Forge) -> str:
    """Gitea's OpenID issuer: its ``ROOT_URL`` without the last slash (Gitea 1.25 and later)."""
    return forge.url.rstrip("/")


def people_file(forge: forges.Forge) -> Path:
    return forge.directory / "people.json"


def client_file(forge: forges.Forge) -> Path:
    return forge.directory / "oidc.json"


def passwords(forge: forges.Forge) -> dict[str, str]:
    """Each provisioned user's password, by name (the admin's too)."""
    path = people_file(forge)
    return dict(json.loads(path.read_text())) if path.exists() else {}


def provision(forge: forges.Forge, *, people: tuple[Person, ...] = PEOPLE) -> dict[str, str]:
    """Create ``people`` and their organizations on the forge (those not created before); their passwords."""
    api = forge.api()
    known = passwords(forge) | {forges.ADMIN: forge.password}
    for person in people:
        if person.name not in known:
            known[person.name] = secrets.token_urlsafe(12)
            api.call("POST", "/admin/users", {
                "username": person.name, "email": f"{person.name}@sandbox.invalid", "password": known[person.name],
                "must_change_password": False,
            })  # fmt: skip
        for org in person.orgs:
            if not _exists(api, f"/orgs/{org}"):
                api.call("POST", f"/admin/users/{person.name}/orgs", {"username": org, "visibility": "private"})
    _write(people_file(forge), known)
    return known


def add_team(forge: forges.Forge, *, org: str, team: str, members: tuple[str, ...]) -> None:
    """A team ``team`` in ``org`` (which must exist) with ``members``: their ``org:team`` group."""
    api = forge.api()
    made: dict[str, Any] = api.call("POST", f"/orgs/{org}/teams", {
        "name": team, "permission": "read", "units": ["repo.code"], "includes_all_repositories": False,
    })  # fmt: skip
    for member in members:
        api.call("PUT", f"/teams/{made['id']}/members/{member}")


def register(forge: forges.Forge, *, redirect_uris: tuple[str, ...], name: str = CLIENT_NAME) -> Client:
    """The console's OAuth2 application, created once; a later call sets its redirect URIs."""
    api = forge.api()
    body = {"name": name, "redirect_uris": list(redirect_uris), "confidential_client": True,
            "skip_secondary_authorization": True}  # fmt: skip
    path = client_file(forge)
    if path.exists():
        kept = json.loads(path.read_text())
        api.call("PATCH", f"/user/applications/oauth2/{kept['id']}", body)
        kept["redirect_uris"] = list(redirect_uris)
    else:
        made = api.call("POST", "/user/applications/oauth2", body)
        kept = {"id": made["id"], "client_id": made["client_id"], "client_secret": made["client_secret"],
                "issuer": issuer(forge), "redirect_uris": list(redirect_uris)}  # fmt: skip
    _write(path, kept)
    return registered(forge)


def registered(forge: forges.Forge) -> Client:
    """The console's client as ``register`` kept it in ``oidc.json``."""
    kept = json.loads(client_file(forge).read_text())
    return Client(
        issuer=str(kept["issuer"]),
        client_id=str(kept["client_id"]),
        client_secret=str(kept["client_secret"]),
        redirect_uris=tuple(kept["redirect_uris"]),
    )


def _exists(api: forges.Api, path: str) -> bool:
    try:
        api.call("GET", path)
    except forges.ForgeError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _write(path: Path, data: Any) -> None:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(json.dumps(data, indent=2) + "\n")


__all__ = [
    "ADMINS",
    "CLIENT_NAME",
    "PEOPLE",
    "Client",
    "Person",
    "add_team",
    "client_file",
    "issuer",
    "passwords",
    "people_file",
    "provision",
    "register",
    "registered",
]
