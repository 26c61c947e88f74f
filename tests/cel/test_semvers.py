"""semver() parses strictly (leading zeros are errors) and orders like blang/semver."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from fleet.cel import SemverError, normalize_and_parse, parse_semver

sys.path.insert(0, str(Path(__file__).parent / "oracle"))
import cases


@pytest.mark.parametrize(
    "text", ["580.95.05", "01.2.3", "1.2", "v1.2.3", "1.2.3-rc.01", "1.2.3-", "1.2.3+", "", "a.b.c"]
)
def test_strict_parse_rejects(text: str) -> None:
    with pytest.raises(SemverError):
        parse_semver(text)


def test_leading_zero_message_names_the_part() -> None:
    with pytest.raises(SemverError, match="Patch number must not contain leading zeroes"):
        parse_semver("580.95.05")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("580.95.05", "580.95.5"),
        ("v1.2", "1.2.0"),
        ("1", "1.0.0"),
        ("01.002.0003", "1.2.3"),
        ("v1.2.3-rc.1", "1.2.3-rc.1"),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert str(normalize_and_parse(text)) == expected


def test_short_version_with_prerelease_is_rejected() -> None:
    with pytest.raises(SemverError, match="short version"):
        normalize_and_parse("1.2-rc")


def test_precedence() -> None:
    ordered = cases.SEMVER_ORDER  # semver.org's precedence example, also run through the Go oracle
    versions = [parse_semver(v) for v in ordered]
    for left, right in itertools.pairwise(versions):
        assert left.compare(right) == -1
        assert right.compare(left) == 1


def test_build_metadata_is_ignored_for_equality() -> None:
    assert parse_semver("1.2.3+a") == parse_semver("1.2.3+b")
