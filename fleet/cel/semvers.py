"""Semantic versions as Kubernetes' CEL ``semver()`` library parses and orders them.

The NVIDIA driver publishes ``driverVersion`` as a semver with leading zeros
dropped (``580.95.05`` → ``580.95.5``), and a selector written as
``semver('580.95.05')`` is an *error* in Kubernetes, not a comparison. This is a
port of ``github.com/blang/semver/v4`` ``Parse``/``Compare`` (strict: exactly
three numeric parts, no leading zeros, prerelease identifiers validated) and of
``normalizeAndParse`` from k8s.io/apiserver v0.37.2
``pkg/cel/library/semverlib.go`` (``semver(s, true)``: strip ``v``, pad
missing minor/patch, drop leading zeros).

Equality follows ``Version.EQ`` (build metadata ignored), so :class:`Semver`
does not keep build metadata at all.
"""

from __future__ import annotations

import dataclasses
import string

_NUMBERS = frozenset(string.digits)
_ALPHANUM = frozenset(string.ascii_letters + string.digits + "-")
_MAX_UINT64 = (1 << 64) - 1


class SemverError(ValueError):
    """A string that the Kubernetes semver library rejects."""


@dataclasses.dataclass(frozen=True)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()

    def compare(self, other: Semver) -> int:
        for mine, theirs in ((self.major, other.major), (self.minor, other.minor), (self.patch, other.patch)):
            if mine != theirs:
                return 1 if mine > theirs else -1
        if not self.pre or not other.pre:
            return (not self.pre) - (not other.pre)
        for mine_id, theirs_id in zip(self.pre, other.pre, strict=False):
            result = _compare_identifier(mine_id, theirs_id)
            if result:
                return result
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def prerelease(self) -> str:
        return ".".join(str(part) for part in self.pre)

    def __str__(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return f"{core}-{self.prerelease()}" if self.pre else core


def _compare_identifier(mine: int | str, theirs: int | str) -> int:
    if isinstance(mine, int) != isinstance(theirs, int):
        return -1 if isinstance(mine, int) else 1
    if mine == theirs:
        return 0
    return 1 if mine > theirs else -1  # type: ignore[operator]


def _number(part: str, what: str) -> int:
    if not part or not set(part) <= _NUMBERS:
        raise SemverError(f"Invalid character(s) found in {what} number {part!r}")
    if len(part) > 1 and part[0] == "0":
        raise SemverError(f"{what.capitalize()} number must not contain leading zeroes {part!r}")
    value = int(part)
    if value > _MAX_UINT64:
        raise SemverError(f"{what} number {part!r} is out of range")
    return value


def parse_semver(text: str) -> Semver:
    """blang ``semver.Parse``: strict, as ``semver(s)`` in CEL."""
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    rest = parts[2]
    build: list[str] = []
    if "+" in rest:
        rest, _, meta = rest.partition("+")
        build = meta.split(".")
    pre_parts: list[str] = []
    if "-" in rest:
        rest, _, pre_text = rest.partition("-")
        pre_parts = pre_text.split(".")
    patch = _number(rest, "patch")
    pre: list[int | str] = []
    for item in pre_parts:
        if not item:
            raise SemverError("Prerelease is empty")
        if set(item) <= _NUMBERS:
            if len(item) > 1 and item[0] == "0":
                raise SemverError(f"Numeric PreRelease version must not contain leading zeroes {item!r}")
            pre.append(int(item))
        elif set(item) <= _ALPHANUM:
            pre.append(item)
        else:
            raise SemverError(f"Invalid character(s) found in prerelease {item!r}")
    for item in build:
        if not item:
            raise SemverError("Build meta data is empty")
        if not set(item) <= _ALPHANUM:
            raise SemverError(f"Invalid character(s) found in build meta data {item!r}")
    return Semver(major, minor, patch, tuple(pre))


def normalize_and_parse(text: str) -> Semver:
    """``normalizeAndParse``: as ``semver(s, true)`` in CEL."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for index, part in enumerate(parts):
        if len(part) > 1:
            trimmed = part.lstrip("0")
            if not trimmed or trimmed[0] not in _NUMBERS:
                trimmed = "0" + trimmed
            parts[index] = trimmed
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))


def is_semver(text: str, *, normalize: bool = False) -> bool:
    try:
        (normalize_and_parse if normalize else parse_semver)(text)
    except SemverError:
        return False
    return True


__all__ = ["Semver", "SemverError", "is_semver", "normalize_and_parse", "parse_semver"]
