"""The built wheel (what the Dockerfile installs) holds every module and data file fleetctl needs."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from fleet.sandbox import versions

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_installs_and_runs_outside_the_source_tree(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    [wheel] = (tmp_path / "dist").glob("fleet-*.whl")
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    deps = sysconfig.get_paths()["purelib"]
    env = dict(os.environ, PYTHONPATH=f"{target}{os.pathsep}{deps}", NO_COLOR="1")
    for args in (["--help"], ["validate", "--help"], ["sandbox", "--help"], ["--version"]):
        run = subprocess.run(
            [
                sys.executable,
                "-I",
                "-c",
                "import sys; sys.path[:0] = sys.argv[1].split(':');"
                " from fleetctl.__main__ import main; sys.argv[1:] = sys.argv[2:]; main()",
                env["PYTHONPATH"],
                *args,
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert run.returncode == 0, run.stderr
    # Installed outside a checkout and not by the image build: no commit to tell, but the pins travel.
    assert run.stdout.splitlines()[1:] == [
        "git commit: unknown",
        f"tested with: Kubernetes {versions.KUBERNETES}, helm {versions.HELM}, "
        f"NVIDIA gpu-operator chart {versions.GPU_OPERATOR}",
    ]
    imported = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            "import sys; sys.path[:0] = sys.argv[1].split(':'); import fleetctl.cli, fleet; print(fleet.__file__)",
            env["PYTHONPATH"],
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert imported.stdout.startswith(str(target))
    # The console's static files (package data: fleet/console/static/**) are installed, unchanged.
    static = ROOT / "fleet" / "console" / "static"
    files = sorted(path.relative_to(static) for path in static.rglob("*") if path.is_file())
    assert Path("vendor/htmx/htmx.min.js") in files
    installed = target / "fleet" / "console" / "static"
    assert [(installed / name).read_bytes() for name in files] == [(static / name).read_bytes() for name in files]
