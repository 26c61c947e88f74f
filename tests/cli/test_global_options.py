"""Options every fleetctl command shares: --trace before the command, --help, piping into head."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.sandbox import Sandbox, credentials

ROOT = Path(__file__).resolve().parents[2]


def fleetctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetctl", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, NO_COLOR="1"),
        check=False,
    )


@pytest.mark.sandbox
def test_global_trace_prints_the_runs_spans(sandbox: Sandbox, tmp_path: Path) -> None:
    # An empty plan cache, so this run loads and renders rather than taking a stored plan.
    run = fleetctl(
        "--trace",
        "diff",
        str(ROOT / "examples" / "fleet"),
        "--cluster",
        "gpu-east",
        "--kubeconfig",
        str(sandbox.kubeconfig),
        "--context",
        credentials.CLUSTER,
        "--cache-dir",
        str(tmp_path),
    )
    assert run.returncode in (0, 1), run.stderr[-2000:]
    for span in ("diff run", "validate", "render", "store plan", "apply stage"):
        assert f'"name": "{span}"' in run.stderr


def test_help_lists_every_command() -> None:
    run = fleetctl("--help")
    assert run.returncode == 0
    for command in ("apply", "demo", "diff", "inventory", "render", "sandbox", "validate"):
        assert command in run.stdout


def test_unknown_command_is_a_usage_error() -> None:
    run = fleetctl("frobnicate")
    assert run.returncode == 2
    assert "invalid choice" in run.stderr


def test_output_piped_into_a_closed_reader_ends_quietly() -> None:
    # The reader is gone before fleetctl writes (its start-up takes far longer than the
    # close), so the first write fails with EPIPE, as with `fleetctl render ... | head -1`.
    read_end, write_end = os.pipe()
    os.close(read_end)
    proc = subprocess.run(
        [sys.executable, "-m", "fleetctl", "render", str(ROOT / "examples" / "fleet"), "--cluster", "gpu-east"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )
    os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_a_command_imports_only_its_own_module() -> None:
    """``fleetctl diff`` does not pay for the other commands' imports (the sandbox's, rich's progress
    bars, ...); with no command named, every command is registered (the two tests above)."""
    probe = (
        "import sys; from fleetctl import cli; cli.build_parser(sys.argv[1:]); "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('fleetctl.commands.', 'fleet.sandbox')))))"
    )
    only = subprocess.run(
        [sys.executable, "-c", probe, "--trace", "diff", "repo"], capture_output=True, text=True, check=True
    )
    assert only.stdout.split() == ["fleetctl.commands.diff"]
    every = subprocess.run([sys.executable, "-c", probe, "--help"], capture_output=True, text=True, check=True)
    assert {"fleetctl.commands.demo", "fleetctl.commands.sandbox", "fleetctl.commands.validate"} <= set(
        every.stdout.split()
    )
