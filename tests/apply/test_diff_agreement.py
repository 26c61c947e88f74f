"""fleetctl diff against ``kubectl diff --server-side --force-conflicts``, field by field.

kubectl is the reference for what a server-side apply would change: both send the
same objects as the same field manager (``fleet``) as dry-runs, so for every object
both must report a change, and the same changed fields. The test makes the kinds of
out-of-band change a new user makes (kubectl patch, a label removed, an object
deleted, a quota raised, a selector changed, a field taken by another manager, a
field added by another manager) plus changes in git, then compares. kubectl's two
directories (live, merged) are captured through ``KUBECTL_EXTERNAL_DIFF`` and
fleet's through its ChangeSet, and both are reduced to field paths the same way.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet import engine
from fleet.engine import diffs, normalizations, ownership
from fleet.sandbox import Sandbox, credentials
from tests.apply.conftest import Engine
from tests.apply.repos import Repo

pytestmark = pytest.mark.sandbox

BOOKKEEPING = (ownership.REVISION, ownership.APPLIED)
"""fleet's own annotations: a change of these alone is never shown (docs/engine.md)."""


def changed_paths(before: dict[str, Any] | None, after: dict[str, Any] | None) -> set[str]:
    """Dotted paths of the fields that differ (lists compare whole), after normalisation."""
    paths: set[str] = set()

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in set(a) | set(b):
                walk(a.get(key), b.get(key), f"{path}.{key}")
        elif a != b:
            paths.add(path or ".")

    walk(_comparable(before), _comparable(after), "")
    return paths


def _comparable(obj: dict[str, Any] | None) -> dict[str, Any]:
    out = normalizations.normalise(obj) or {}
    annotations = (out.get("metadata") or {}).get("annotations") or {}
    for key in BOOKKEEPING:
        annotations.pop(key, None)
    if "annotations" in out.get("metadata", {}) and not annotations:
        out["metadata"].pop("annotations")
    return out


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj['kind']} {meta.get('namespace') or ''}/{meta['name']}"


def kubectl_diff(sandbox: Sandbox, objects: list[dict[str, Any]], tmp: Path) -> dict[str, set[str]]:
    """``kubectl diff --server-side --force-conflicts`` as field manager fleet: object → changed paths."""
    manifest = tmp / "desired.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    capture = tmp / "kubectl-dirs"
    script = tmp / "capture-diff"
    script.write_text(
        f'#!/bin/sh\nrm -rf {capture} && mkdir -p {capture} && cp -r "$1" {capture}/live '
        f'&& cp -r "$2" {capture}/merged\nexit 1\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    run = subprocess.run(
        [
            str(sandbox.binary("kubectl")),
            "--kubeconfig",
            str(sandbox.kubeconfig),
            "--context",
            credentials.CLUSTER,
            "diff",
            "--server-side",
            "--force-conflicts",
            "--field-manager=fleet",
            "-f",
            str(manifest),
        ],
        env=dict(os.environ, KUBECTL_EXTERNAL_DIFF=str(script)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode in (0, 1), run.stderr
    found: dict[str, set[str]] = {}
    for merged_file in sorted((capture / "merged").iterdir()) if capture.exists() else ():
        merged = yaml.safe_load(merged_file.read_text())
        live_file = capture / "live" / merged_file.name
        live = yaml.safe_load(live_file.read_text()) if live_file.exists() else None
        paths = changed_paths(live, merged)
        if paths:
            found[_key(merged)] = paths
    return found


def fleet_paths(changes: engine.ChangeSet) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for entry in changes.entries:
        if entry.action in (engine.Action.CREATED, engine.Action.CONFIGURED) and not entry.replace:
            paths = changed_paths(entry.before, entry.after)
            if paths:
                found[_key(entry.after or {})] = paths
    return found


def test_every_change_kubectl_sees_fleet_shows_with_the_same_fields(
    fleet: Engine, repo: Repo, sandbox: Sandbox, kubectl: Any, tmp_path: Path
) -> None:
    ml, infra = repo.ns("ml"), repo.ns("infra")
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.team("infra", namespaces=["infra"], group="infra", quota=2)
    repo.claim_template("ml", "pair", count=2)
    repo.claim_template("infra", "one", count=1)
    second = f"t-{repo.id}-b.gpu.example.com"
    repo.files[f"deviceclasses/{second}.yaml"] = textwrap.dedent(f"""\
        apiVersion: resource.k8s.io/v1
        kind: DeviceClass
        metadata:
          name: {second}
        spec:
          selectors:
          - cel:
              expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
        """)
    fleet.apply()

    # Out of band, as a new user would.
    kubectl(
        "patch",
        "deviceclass",
        repo.device_class_name,
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"selectors": [{"cel": {"expression": "device.driver == 'other.example.com'"}}]}}),
    )
    kubectl("label", "namespace", ml, f"{ownership.TEAM_LABEL}-")  # a label removed
    kubectl("delete", "rolebinding", "fleet-team-claims", "-n", infra)  # an object deleted
    kubectl(
        "patch",
        "resourcequota",
        "fleet-devices",
        "-n",
        ml,
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"hard": {f"{repo.device_class_name}.deviceclass.resource.k8s.io/devices": "8"}}}),
    )
    kubectl(
        "patch",
        "role",
        "fleet-team-claims",
        "-n",
        ml,
        "--type",
        "json",
        "-p",
        json.dumps([{"op": "add", "path": "/rules/0/verbs/-", "value": "patch"}]),
    )
    kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=ops-script",
        "-f",
        "-",
        stdin=json.dumps(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": second, "labels": {ownership.CLUSTER_LABEL: "elsewhere"}},
            }
        ),
    )
    kubectl("label", "namespace", infra, "owner=someone")  # a field fleet does not set: no change
    kubectl("annotate", "deviceclass", second, "note=kept")
    # And in git: a template's count (immutable: replaced) and a new template.
    repo.claim_template("ml", "pair", count=3)
    repo.claim_template("ml", "single", count=1)

    changes = fleet.diff()
    ours = fleet_paths(changes)
    plan = fleet.plan()
    live = {(_key(d.obj)): d for d in plan.objects}
    current = fleet.run(lambda c: _live(c, [d.obj for d in plan.objects]))
    objects = [
        diffs.with_live_revision(d.obj, current[k]) if k in current else d.obj
        for k, d in live.items()
        if not k.startswith(f"ResourceClaimTemplate {ml}/pair")
    ]
    theirs = kubectl_diff(sandbox, objects, tmp_path)

    assert set(theirs) >= {
        f"DeviceClass /{repo.device_class_name}",
        f"Namespace /{ml}",
        f"RoleBinding {infra}/fleet-team-claims",
        f"ResourceQuota {ml}/fleet-devices",
        f"Role {ml}/fleet-team-claims",
        f"DeviceClass /{second}",
        f"ResourceClaimTemplate {ml}/single",
    }, "the scenario's changes are what kubectl reports"
    assert ours == theirs
    assert f"Namespace /{infra}" not in ours, "a field another manager added is not fleet's change"

    conflicts = {str(e.ref): {(c.manager, c.field) for c in e.conflicts} for e in changes.entries if e.conflicts}
    assert conflicts[f"DeviceClass {repo.device_class_name}"] == {("kubectl-patch", ".spec.selectors")}
    assert conflicts[f"ResourceQuota {ml}/fleet-devices"] == {
        ("kubectl-patch", f".spec.hard.{repo.device_class_name}.deviceclass.resource.k8s.io/devices")
    }
    assert conflicts[f"DeviceClass {second}"] == {("ops-script", f".metadata.labels.{ownership.CLUSTER_LABEL}")}
    assert not changes.failed

    replaced = next(e for e in changes.entries if str(e.ref) == f"ResourceClaimTemplate {ml}/pair")
    assert replaced.replace and replaced.after is not None
    request = replaced.after["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["count"] == 3
    assert request["allocationMode"] == "ExactCount", "the preview is the server's object, defaults included"


async def _live(client: Any, objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    from fleet.engine import listings

    index = await listings.live_index(client=client, kinds={(o["apiVersion"], o["kind"]) for o in objs})
    return {_key(o): o for o in index.values()}


def test_cli_lists_the_fields_enforce_takes_back_and_the_apply_does_what_the_diff_showed(
    fleet: Engine, repo: Repo, sandbox: Sandbox, kubectl: Any
) -> None:
    repo.team("ml", namespaces=["ml"], group="ml-research", quota=4)
    repo.claim_template("ml", "one")
    fleet.apply()
    ml = repo.ns("ml")
    kubectl(
        "patch",
        "resourcequota",
        "fleet-devices",
        "-n",
        ml,
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"hard": {f"{repo.device_class_name}.deviceclass.resource.k8s.io/devices": "9"}}}),
    )
    kubectl(
        "patch",
        "deviceclass",
        repo.device_class_name,
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"selectors": [{"cel": {"expression": "device.driver == 'x.example.com'"}}]}}),
    )
    kubectl("delete", "rolebinding", "fleet-team-claims", "-n", ml)
    path = str(repo.write())

    def fleetctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "fleetctl",
                *args,
                path,
                "--cluster",
                repo.cluster,
                "--kubeconfig",
                str(sandbox.kubeconfig),
                "--context",
                credentials.CLUSTER,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env=dict(os.environ, NO_COLOR="1"),
        )

    plain = fleetctl("diff")
    assert plain.returncode == 1, plain.stderr
    assert "Traceback" not in plain.stderr
    for shown in (
        f"DeviceClass {repo.device_class_name}",
        f"ResourceQuota {ml}/fleet-devices",
        f"RoleBinding {ml}/fleet-team-claims",
    ):
        assert shown in plain.stdout, f"{shown} missing from:\n{plain.stdout}"
    # Drift policy enforce (the default): git wins, and the preview names what it takes back from whom.
    assert f"takes back: ResourceQuota {ml}/fleet-devices: .spec.hard." in plain.stdout
    assert "(owned by kubectl-patch) (drift policy enforce)" in plain.stdout
    assert "conflict:" not in plain.stdout

    as_json = json.loads(fleetctl("diff", "-o", "json").stdout)
    quota = next(e for e in as_json["entries"] if e["object"]["kind"] == "ResourceQuota")
    assert quota["action"] == "configured" and quota["diff"] and quota["forced"]
    assert [c["manager"] for c in quota["conflicts"]] == ["kubectl-patch"]

    forced = fleetctl("diff", "--force-conflicts")
    assert forced.returncode == 1, forced.stderr
    assert "takes back:" not in forced.stdout
    assert [line for line in forced.stdout.splitlines() if line[:1] in "+-"] == [
        line for line in plain.stdout.splitlines() if line[:1] in "+-"
    ], "the same change, without the list of fields taken"
    preview = fleet.diff(force_conflicts=True)

    dry = fleetctl("apply", "--dry-run")
    assert dry.returncode == 0 and f"takes back: ResourceQuota {ml}/fleet-devices" in dry.stdout

    applied = fleetctl("apply")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "kubectl-patch" in applied.stdout
    after = fleet.run(lambda c: _live(c, [e.after for e in preview.entries if e.after]))
    for entry in preview.entries:
        if entry.action == engine.Action.CONFIGURED:
            key = _key(entry.after or {})
            assert changed_paths(entry.after, after[key]) == set(), f"{key}: the apply made what the diff showed"
    assert fleetctl("diff").returncode == 0
