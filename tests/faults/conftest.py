"""Fault tests reuse the apply tests' repository builder and engine runner."""

from tests.apply.conftest import fleet, repo

__all__ = ["fleet", "repo"]
