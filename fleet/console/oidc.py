"""Logging a person in through an OpenID Connect provider: the relying party's side of the code flow.

The console sends the browser to the provider's ``authorization_endpoint`` with a
``state`` (ties the answer to this browser), a ``nonce`` (ties the ID token to this
attempt) and a PKCE S256 challenge (the code is useless to whoever intercepts it without
the ``verifier``). The provider sends the browser back with a code; ``exchange`` trades it
at the ``token_endpoint`` for an ID token and trusts nothing in it until

- its signature verifies with a key of the provider's JWKS, under an asymmetric algorithm
  (``alg: none`` and HMAC, whose key would be the client secret, are refused);
- ``iss`` is the issuer exactly, ``aud`` names this client (and ``azp`` too, when several
  audiences are named), ``exp`` is in the future and ``nonce`` is the attempt's.

The keys are fetched once and kept: one provider's set, fetched again when a token names a
``kid`` the set lacks (the provider rotated its key), at most once a minute, so a stream of
forged ``kid``s cannot turn the console into a load on the provider.

The claims become a ``Viewer`` by ``claims_viewer``, the one place that decides names.
Kubernetes gives the ``system:`` prefix its meaning (``system:masters`` bypasses RBAC), and a
provider's group names are chosen by its users: Gitea names a team ``org:team``, so the team
``masters`` of an org named ``system`` arrives as ``system:masters``. Such groups are dropped
and such usernames refused, unless the provider is given a prefix that every name then
carries. A login that fails for any reason raises ``Unauthenticated`` with what and a hint;
a provider that cannot be reached or read raises ``ProviderError``.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx
from joserfc import errors as jose_errors
from joserfc import jws, jwt
from joserfc.jwk import KeySet

from fleet.console.viewers import Unauthenticated, Viewer
from fleet.errors import FleetError

SYSTEM = "system:"
"""Kubernetes' reserved prefix: no name a provider chose may carry it."""
ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"})
"""Signatures checked with the provider's public keys; HMAC and ``none`` are refused."""
KEYS_REFRESH = 60.0
"""Seconds between two fetches of the JWKS for an unknown ``kid``."""
LEEWAY = 30
"""Seconds of clock skew allowed between the provider and the console (``exp``, ``iat``)."""
RELOGIN = "log in again"


class ProviderError(FleetError):
    """The OpenID provider could not be reached or answered what is not OpenID Connect."""


@dataclass(frozen=True)
class Provider:
    """An OpenID provider and this console's registration with it (a confidential client)."""

    issuer: str
    client_id: str
    client_secret: str
    redirect_uri: str
    scopes: tuple[str, ...] = ("openid", "profile", "email", "groups")
    username_claim: str = "preferred_username"
    groups_claim: str = "groups"
    user_prefix: str = ""
    group_prefix: str = ""

    def __post_init__(self) -> None:
        for name, prefix in (("user_prefix", self.user_prefix), ("group_prefix", self.group_prefix)):
            if prefix.startswith(SYSTEM):
                raise ProviderError(
                    f"{name} {prefix!r} starts with {SYSTEM!r}, which Kubernetes reserves",
                    where=self.issuer,
                    hint="choose a prefix such as 'oidc:'",
                )

    def __repr__(self) -> str:  # the secret never reaches a log line
        return f"Provider(issuer={self.issuer!r}, client_id={self.client_id!r}, redirect_uri={self.redirect_uri!r})"


@dataclass(frozen=True)
class Attempt:
    """One login's secrets, kept by the browser's session from the redirect out to the one back."""

    state: str
    nonce: str
    verifier: str

    @classmethod
    def new(cls) -> Attempt:
        return cls(state=secrets.token_urlsafe(24), nonce=secrets.token_urlsafe(24), verifier=secrets.token_urlsafe(48))


def challenge(verifier: str) -> str:
    """PKCE's S256 code challenge of ``verifier`` (RFC 7636 §4.2)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def claims_viewer(claims: Mapping[str, Any], *, provider: Provider) -> Viewer:
    """The viewer an ID token's verified claims name: prefixed, with ``system:`` groups dropped."""
    user = claims.get(provider.username_claim)
    if not isinstance(user, str) or not user:
        raise Unauthenticated(
            f"the ID token has no {provider.username_claim!r} claim naming a user",
            where=provider.issuer,
            hint=f"ask for the scope that carries it (now {' '.join(provider.scopes)}), or set username_claim",
        )
    name = provider.user_prefix + user
    if name.startswith(SYSTEM):
        raise Unauthenticated(
            f"the provider named the user {name!r}, in Kubernetes' reserved {SYSTEM!r} space",
            where=provider.issuer,
            hint="set a user_prefix for this provider, or rename the user there",
        )
    raw = claims.get(provider.groups_claim, [])
    listed = [raw] if isinstance(raw, str) else raw
    if not isinstance(listed, list) or not all(isinstance(g, str) for g in listed):
        raise Unauthenticated(
            f"the ID token's {provider.groups_claim!r} claim is not a list of names",
            where=provider.issuer,
            hint="check the provider's groups claim, or set groups_claim",
        )
    groups = (provider.group_prefix + g for g in listed if g)
    exp = claims.get("exp", 0)
    return Viewer(
        user=name,
        groups=tuple(dict.fromkeys(g for g in groups if not g.startswith(SYSTEM))),
        expires=float(exp) if isinstance(exp, int | float) else 0.0,
        via="oidc",
    )


class RelyingParty:
    """The console's side of one provider: its endpoints, its keys and the code flow. Make it with ``discover``."""

    def __init__(
        self,
        *,
        provider: Provider,
        http: httpx.AsyncClient,
        metadata: Mapping[str, Any],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.provider = provider
        self.http = http
        self.authorization_endpoint = _endpoint(metadata, "authorization_endpoint", provider)
        self.token_endpoint = _endpoint(metadata, "token_endpoint", provider)
        self.jwks_uri = _endpoint(metadata, "jwks_uri", provider)
        self.clock = clock
        """Epoch seconds, read when an ID token's times are checked (tests move it)."""
        self._keys = KeySet([])
        self._fetched = -KEYS_REFRESH
        self._fetching = anyio.Lock()

    def authorize_url(self, *, state: str, nonce: str, verifier: str) -> str:
        """Where to send the browser: the provider's login, asking for a code back at ``redirect_uri``."""
        query = {
            "response_type": "code",
            "client_id": self.provider.client_id,
            "redirect_uri": self.provider.redirect_uri,
            "scope": " ".join(self.provider.scopes),
            "state": state,
            "nonce": nonce,
            "code_challenge": challenge(verifier),
            "code_challenge_method": "S256",
        }
        joiner = "&" if "?" in self.authorization_endpoint else "?"
        return f"{self.authorization_endpoint}{joiner}{urlencode(query)}"

    async def callback(self, *, attempt: Attempt, query: Mapping[str, str]) -> Viewer:
        """The viewer of the provider's redirect back (its query string), for the browser's ``attempt``.

        The ``state`` must be the attempt's (else another site started this login: login CSRF);
        an ``error`` (the user declined, the provider refused) is ``Unauthenticated`` with its words."""
        where = self.provider.redirect_uri
        if "error" in query:
            said = f"{query['error']}: {query.get('error_description', '')}".rstrip(": ")
            raise Unauthenticated(f"the provider did not log you in ({said})", where=where, hint=RELOGIN)
        if not secrets.compare_digest(query.get("state", "").encode(), attempt.state.encode()):
            raise Unauthenticated("the login's state is not the one this browser started", where=where,
                                  hint="start the login again from the console, in one browser tab")  # fmt: skip
        if not query.get("code"):
            raise Unauthenticated("the provider sent no login code back", where=where, hint=RELOGIN)
        return await self.exchange(code=query["code"], verifier=attempt.verifier, nonce=attempt.nonce)

    async def exchange(self, *, code: str, verifier: str, nonce: str) -> Viewer:
        """Trade the code the provider sent back for a verified ID token; the viewer it names."""
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.provider.redirect_uri,
            "code_verifier": verifier,
            "client_id": self.provider.client_id,
            "client_secret": self.provider.client_secret,
        }
        answer = await self._call("POST", self.token_endpoint, data=form)
        if answer.status_code != 200:
            said = _json(answer)
            reason = f"{said.get('error', answer.status_code)}: {said.get('error_description', '')}".rstrip(": ")
            raise Unauthenticated(f"the provider refused the login code ({reason})", where=self.token_endpoint,
                                  hint=RELOGIN)  # fmt: skip
        id_token = _json(answer).get("id_token")
        if not isinstance(id_token, str):
            raise Unauthenticated(
                "the provider's answer has no ID token", where=self.token_endpoint, hint="ask for the 'openid' scope"
            )
        return claims_viewer(await self.verify(id_token, nonce=nonce), provider=self.provider)

    async def verify(self, id_token: str, *, nonce: str) -> dict[str, Any]:
        """The claims of ``id_token`` once its signature, issuer, audience, expiry and nonce hold."""
        where = self.provider.issuer
        try:
            header = jws.extract_compact(id_token.encode("ascii")).protected
        except (jose_errors.JoseError, ValueError, UnicodeError):
            raise Unauthenticated("the ID token is not a signed JWT", where=where, hint=RELOGIN) from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise Unauthenticated(
                f"the ID token is signed with {alg!r}, not one of the provider's key algorithms",
                where=where,
                hint="configure the provider to sign ID tokens with RS256 or ES256",
            )
        key = await self._key(str(header.get("kid", "")))
        try:
            claims = jwt.decode(id_token, key, algorithms=[str(alg)]).claims
        except jose_errors.JoseError:
            raise Unauthenticated(
                "the ID token's signature does not verify with the provider's keys", where=where, hint=RELOGIN
            ) from None
        expected = jwt.JWTClaimsRegistry(
            now=lambda: int(self.clock()),
            leeway=LEEWAY,
            iss={"essential": True, "value": self.provider.issuer},
            aud={"essential": True, "value": self.provider.client_id},
            exp={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            expected.validate(claims)
        except jose_errors.ExpiredTokenError:
            raise Unauthenticated("the ID token has expired", where=where, hint=RELOGIN) from None
        except jose_errors.ClaimError as exc:
            raise Unauthenticated(
                f"the ID token's {exc.claim!r} claim is missing or not this login's", where=where, hint=RELOGIN
            ) from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.provider.client_id:
            raise Unauthenticated(
                "the ID token names several audiences but was not issued to this client (azp)",
                where=where,
                hint=RELOGIN,
            )
        return dict(claims)

    async def _key(self, kid: str) -> Any:
        """The provider's key ``kid``; the set is fetched again, at most once a minute, for one it lacks."""
        found = _find(self._keys, kid)
        if found is None:
            async with self._fetching:
                found = _find(self._keys, kid)
                if found is None and self.clock() - self._fetched >= KEYS_REFRESH:
                    self._fetched = self.clock()
                    self._keys = await self._fetch_keys()
                    found = _find(self._keys, kid)
        if found is None:
            raise Unauthenticated(
                f"the ID token names a key ({kid or 'no kid'}) the provider does not publish",
                where=self.jwks_uri,
                hint=RELOGIN,
            )
        return found

    async def _fetch_keys(self) -> KeySet:
        answer = await self._call("GET", self.jwks_uri)
        try:
            answer.raise_for_status()
            return KeySet.import_key_set(answer.json())
        except (httpx.HTTPStatusError, ValueError, KeyError, TypeError, jose_errors.JoseError) as exc:
            raise ProviderError(
                f"the provider's key set could not be read: {exc}", where=self.jwks_uri, hint="check the provider"
            ) from None

    async def _call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self.http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"no answer from the OpenID provider: {exc}", where=url, hint="check that the provider is running"
            ) from None


async def discover(
    provider: Provider, *, http: httpx.AsyncClient, clock: Callable[[], float] = time.time
) -> RelyingParty:
    """Read ``{issuer}/.well-known/openid-configuration``; a relying party for its endpoints."""
    url = f"{provider.issuer.rstrip('/')}/.well-known/openid-configuration"
    hint = "check the issuer URL: it is the provider's base URL, which its discovery document repeats"
    try:
        answer = await http.get(url)
        answer.raise_for_status()
        metadata = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ProviderError(f"OpenID discovery failed: {exc}", where=url, hint=hint) from None
    if not isinstance(metadata, dict) or metadata.get("issuer") != provider.issuer:
        said = metadata.get("issuer") if isinstance(metadata, dict) else None
        raise ProviderError(f"the provider calls itself {said!r}, not {provider.issuer!r}", where=url, hint=hint)
    return RelyingParty(provider=provider, http=http, metadata=metadata, clock=clock)


def _endpoint(metadata: Mapping[str, Any], name: str, provider: Provider) -> str:
    value = metadata.get(name)
    if not isinstance(value, str) or not value.startswith(("https://", "http://")):
        raise ProviderError(
            f"the discovery document has no {name}", where=provider.issuer, hint="is this an OpenID provider?"
        )
    return value


def _find(keys: KeySet, kid: str) -> Any:
    try:
        return keys.get_by_kid(kid or None) if keys.keys else None
    except (ValueError, jose_errors.JoseError):
        return None


def _json(answer: httpx.Response) -> dict[str, Any]:
    try:
        said = answer.json()
    except ValueError:
        return {}
    return said if isinstance(said, dict) else {}


__all__ = [
    "ALGORITHMS",
    "KEYS_REFRESH",
    "LEEWAY",
    "RELOGIN",
    "SYSTEM",
    "Attempt",
    "Provider",
    "ProviderError",
    "RelyingParty",
    "challenge",
    "claims_viewer",
    "discover",
]
