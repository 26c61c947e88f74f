"""The authentication modules of fleet.console export what the console's app is meant to use, and only that."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest

from fleet.console import oidc, tokens, viewers
from fleet.errors import FleetError

MEANT = {
    viewers: {"Unauthenticated", "Via", "Viewer"},
    oidc: {"ALGORITHMS", "KEYS_REFRESH", "LEEWAY", "RELOGIN", "SYSTEM", "Attempt", "Provider", "ProviderError",
           "RelyingParty", "challenge", "claims_viewer", "discover"},
    tokens: {"HINT", "PATH", "Reviews", "review"},
}  # fmt: skip


@pytest.mark.parametrize("module", list(MEANT), ids=lambda m: m.__name__)
def test_all_is_what_is_meant_and_defined_here(module: ModuleType) -> None:
    assert set(module.__all__) == MEANT[module]
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == module.__name__, name


def test_every_refusal_is_a_fleet_error() -> None:
    assert issubclass(viewers.Unauthenticated, FleetError)
    assert issubclass(oidc.ProviderError, FleetError)
