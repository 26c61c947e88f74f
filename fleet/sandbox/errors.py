"""Errors of the sandbox: bad profiles, failed builds, components that do not start."""

from __future__ import annotations

from fleet.errors import FleetError


class SandboxError(FleetError):
    """Anything that stops the sandbox from being built, started or stopped."""


class ProfileError(SandboxError):
    """A sandbox profile that does not parse or names unknown pools; nothing was started."""


class BuildError(SandboxError):
    """A Go build of a control-plane binary, KWOK or Helm failed."""


class StartError(SandboxError):
    """A component did not become ready; carries the tail of its log."""


__all__ = ["BuildError", "ProfileError", "SandboxError", "StartError"]
