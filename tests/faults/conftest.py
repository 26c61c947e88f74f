"""Fault tests reuse the apply tests' repository builder and engine runner, and the controller
tests' git remote and real controller processes."""

from tests.apply.conftest import fleet, repo
from tests.controller.conftest import fleetsync_crd, remote
from tests.controller.replicas import replicas

__all__ = ["fleet", "fleetsync_crd", "remote", "replicas", "repo"]
