"""Which Kubernetes release the sandbox runs, and the flags each release's components get (pure).

The expected flags are read from each release's ``pkg/features/kube_features.go`` and
``pkg/registry/resource/rest``, not from ``fleet.sandbox.releases``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fleet.policy import featuregates
from fleet.sandbox import binaries, releases, versions
from fleet.sandbox.errors import SandboxError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text", ["1.34", "v1.34", "v1.34.4", "1.34.4", " 1.34 "])
def test_a_release_is_named_by_its_minor_or_its_version(text: str) -> None:
    assert releases.select(text).version == "v1.34.4"


def test_the_environment_selects_and_the_default_is_the_pinned_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(releases.ENV, raising=False)
    assert releases.select() == releases.DEFAULT
    assert releases.DEFAULT.version == versions.KUBERNETES == "v1.37.2"
    monkeypatch.setenv(releases.ENV, "1.35")
    assert releases.select().version == "v1.35.4"
    assert releases.select("1.36").version == "v1.36.3"  # the flag wins


def test_an_unknown_release_is_refused_naming_the_selectable_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(releases.ENV, "1.33")
    with pytest.raises(SandboxError) as err:
        releases.select()
    assert err.value.where == releases.ENV
    assert "Kubernetes '1.33' is not a release the sandbox can run" in str(err.value)
    assert err.value.hint == "choose one of 1.34 (v1.34.4), 1.35 (v1.35.4), 1.36 (v1.36.3), 1.37 (v1.37.2, the default)"


def test_every_release_has_its_module_file_and_a_cache_folder_of_its_own() -> None:
    assert [r.name for r in releases.ALL] == ["1.34", "1.35", "1.36", "1.37"]
    for release in releases.ALL:
        mod = ROOT / "tools" / "ktestenv" / release.modfile
        assert f"k8s.io/kubernetes {release.version}\n" in mod.read_text()
        assert mod.with_suffix(".sum").exists()
    assert releases.DEFAULT.modfile == "go.mod"
    assert len({binaries.kube_dir(r) for r in releases.ALL}) == len(releases.ALL)
    check = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "ktestenv" / "gomod.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr


TAINT_RULES = {
    "1.34": ("DRADeviceTaints", "resource.k8s.io/v1alpha3"),
    "1.35": ("DRADeviceTaintRules", "resource.k8s.io/v1alpha3"),
    "1.36": ("DRADeviceTaintRules", "resource.k8s.io/v1beta2"),
}
"""The gate and the API version that serve DeviceTaintRule, where it is not served by default."""


@pytest.mark.parametrize("release", releases.ALL, ids=lambda r: r.name)
def test_each_release_turns_on_its_dra_gates_and_serves_device_taint_rules(release: releases.Release) -> None:
    gates = set(release.feature_gates)
    if release.name in TAINT_RULES:
        gate, api = TAINT_RULES[release.name]
        assert gate in gates and "DRADeviceTaints" in gates | featuregates.effective(release.minor, {})
        assert f"{api}=true" in release.apiserver_flags()[-1]
    else:  # 1.37: DeviceTaintRule in resource.k8s.io/v1, served and gated on by default
        assert {"resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3"}.isdisjoint(release.runtime_config)
    on = featuregates.effective(release.minor, dict.fromkeys(gates, True))
    for name in gates:
        spec = featuregates.GATES[name].spec(release.minor)
        assert spec is not None and not spec.locked and not spec.default, name  # never unknown, locked or a no-op
        assert name in on, f"{name} depends on a gate that is off in {release.name}"
    assert {"DynamicResourceAllocation", "DRAAdminAccess"}.isdisjoint(gates)  # on by default in every release
    assert all(name.startswith("DRA") for name in gates)  # not GenericWorkload, which a DRA gate needs
    if release.minor == 34:  # all alpha in 1.34, so all turned on
        assert {"DRAConsumableCapacity", "DRAPartitionableDevices", "DRAExtendedResource"} <= gates
    assert release.flags() == ([f"--feature-gates={','.join(f'{g}=true' for g in sorted(gates))}"] if gates else [])
