"""Write the hostile pull-request corpus ``tests/hostile_prs/*.diff`` from the changes listed here.

Each entry is a pull request against ``examples/fleet``: a few files written, edited or
linked. The script commits the example in a scratch git repository, makes the change,
and writes ``git diff --binary`` (so a 2 MiB file is a few hundred bytes of
``GIT binary patch``) behind a header that says what the PR tries and what
``fleetctl validate`` must answer::

    Subject: <what the pull request does>
    Team: ml-research                 (escalations only: the team whose owners apply it)
    Expect: RULE FILE:LINE MESSAGE    (one per finding; validate must report exactly these errors)

``git apply`` skips the header. With ``--record`` the Expect lines are taken from what
``fleetctl validate`` says now: review them before committing; the test
(``tests/hostile_prs/test_validate.py``) then holds validate to them.

Usage: ``python tools/hostile_prs.py [--record] [NAME...]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "fleet"
CORPUS = ROOT / "tests" / "hostile_prs"

Edit = Callable[[Path], None]


def write(path: str, text: str) -> Edit:
    def run(repo: Path) -> None:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)

    return run


def write_bytes(path: str, data: bytes) -> Edit:
    def run(repo: Path) -> None:
        (repo / path).write_bytes(data)

    return run


def replace(path: str, old: str, new: str) -> Edit:
    def run(repo: Path) -> None:
        text = (repo / path).read_text()
        if old not in text:
            raise SystemExit(f"{path}: {old!r} not found")
        (repo / path).write_text(text.replace(old, new, 1))

    return run


def symlink(path: str, target: str) -> Edit:
    def run(repo: Path) -> None:
        os.symlink(target, repo / path)

    return run


@dataclass(frozen=True)
class PR:
    name: str
    subject: str
    edits: tuple[Edit, ...]
    team: str = ""  # set for escalations: tests/hostile_prs/test_isolation.py applies them as this team
    extra: list[str] = field(default_factory=list)


HEAD = "# yaml-language-server: $schema=../../../../schemas/resourceclaimtemplate.schema.json\n"


def template(
    *,
    name: str,
    namespace: str = "ml-research",
    request: str = "",
    kind: str = "ResourceClaimTemplate",
    api: str = "resource.k8s.io/v1",
    count: str = "",
    cls: str = "gpu.nvidia.com",
) -> str:
    inner = "spec:\n  spec:\n" if kind == "ResourceClaimTemplate" else "spec:\n"
    pad = "    " if kind == "ResourceClaimTemplate" else "  "
    lines = [
        f"apiVersion: {api}",
        f"kind: {kind}",
        "metadata:",
        f"  name: {name}",
        f"  namespace: {namespace}",
        inner.rstrip("\n"),
        f"{pad}devices:",
        f"{pad}  requests:",
        f"{pad}  - name: gpu",
        f"{pad}    exactly:",
        f"{pad}      deviceClassName: {cls}",
    ]
    if count:
        lines.append(f"{pad}      count: {count}")
    for extra in filter(None, request.split("\n")):
        lines.append(f"{pad}      {extra}")
    return HEAD + "\n".join(lines) + "\n"


def selector(name: str, expression: str) -> Edit:
    request = f"selectors:\n- cel:\n    expression: {expression}"
    return write(f"teams/ml-research/{name}.yaml", template(name=name, request=request))


ML = "teams/ml-research"
BOMB = (
    "\n".join(
        ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [f"{n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]" for p, n in zip("abcdefgh", "bcdefghi", strict=True)]
    )
    + "\n"
)
DEEP = (
    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
    "metadata:\n  name: deep\n  namespace: ml-research\nspec: " + "[" * 80 + "]" * 80 + "\n"
)

PRS: tuple[PR, ...] = (
    # --- privilege escalation from a team folder
    PR(
        "clusterrole",
        "ml-research adds a ClusterRole that reads every Secret",
        (
            write(
                f"{ML}/clusterrole.yaml",
                """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ml-research-secrets
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list]
""",
            ),
        ),
        team="ml-research",
    ),
    PR(
        "clusterrolebinding",
        "ml-research binds itself to cluster-admin",
        (
            write(
                f"{ML}/admin.yaml",
                """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: ml-research-admin
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
- kind: Group
  name: ml-research-admins
  apiGroup: rbac.authorization.k8s.io
""",
            ),
        ),
        team="ml-research",
    ),
    PR(
        "rolebinding",
        "ml-research binds cluster-admin inside its own namespace",
        (
            write(
                f"{ML}/binding.yaml",
                """\
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: ml-research-admin
  namespace: ml-research
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
- kind: Group
  name: ml-research-admins
  apiGroup: rbac.authorization.k8s.io
""",
            ),
        ),
        team="ml-research",
    ),
    PR(
        "role",
        "ml-research widens its rights with a Role of its own on Secrets",
        (
            write(
                f"{ML}/role.yaml",
                """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: fleet-team-claims
  namespace: ml-research
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["*"]
""",
            ),
        ),
        team="ml-research",
    ),
    PR(
        "deviceclass",
        "ml-research defines a DeviceClass that selects every device",
        (
            write(
                f"{ML}/all-devices.yaml",
                """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: everything.ml-research
spec:
  selectors:
  - cel:
      expression: "true"
""",
            ),
        ),
        team="ml-research",
    ),
    PR(
        "namespace",
        "ml-research creates a Namespace of its own",
        (
            write(
                f"{ML}/namespace.yaml",
                """\
apiVersion: v1
kind: Namespace
metadata:
  name: ml-research-scratch
""",
            ),
        ),
        team="ml-research",
    ),
    PR(
        "other-team-namespace",
        "ml-research writes a template into inference's namespace",
        (write(f"{ML}/steal.yaml", template(name="steal", namespace="inference")),),
        team="ml-research",
    ),
    PR(
        "other-team-claim-overwrite",
        "ml-research redefines inference's single-gpu template in inference",
        (write(f"{ML}/overwrite.yaml", template(name="single-gpu", namespace="inference", count="8")),),
        team="ml-research",
    ),
    PR(
        "kube-system",
        "ml-research puts a claim into kube-system",
        (write(f"{ML}/system.yaml", template(name="system", namespace="kube-system", kind="ResourceClaim")),),
        team="ml-research",
    ),
    PR(
        "admin-access",
        "ml-research asks for adminAccess to every GPU (sees other teams' devices)",
        (write(f"{ML}/admin-access.yaml", template(name="admin-access", request="adminAccess: true")),),
        team="ml-research",
    ),
    PR(
        "admin-access-claim",
        "ml-research claims adminAccess directly in a ResourceClaim",
        (
            write(
                f"{ML}/admin-claim.yaml",
                template(name="admin-claim", kind="ResourceClaim", request="adminAccess: true"),
            ),
        ),
        team="ml-research",
    ),
    PR(
        "resourceslice",
        "ml-research publishes a fake ResourceSlice",
        (
            write(
                f"{ML}/slice.yaml",
                """\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: fake-h200
spec:
  driver: gpu.nvidia.com
  nodeName: gpu-node-0
  pool:
    name: fake
    generation: 1
    resourceSliceCount: 1
  devices:
  - name: gpu-0
""",
            ),
        ),
        team="ml-research",
    ),
    PR(
        "secret",
        "ml-research commits a Secret",
        (
            write(
                f"{ML}/secret.yaml",
                """\
apiVersion: v1
kind: Secret
metadata:
  name: token
  namespace: ml-research
stringData:
  token: hunter2
""",
            ),
        ),
        team="ml-research",
    ),
    PR(
        "pod",
        "ml-research runs a privileged Pod through fleet",
        (
            write(
                f"{ML}/pod.yaml",
                """\
apiVersion: v1
kind: Pod
metadata:
  name: miner
  namespace: ml-research
spec:
  containers:
  - name: c
    image: busybox
    securityContext:
      privileged: true
""",
            ),
        ),
        team="ml-research",
    ),
    PR(
        "node-labels",
        "ml-research relabels a GPU node into its own pool",
        (
            write(
                f"{ML}/node.yaml",
                """\
apiVersion: v1
kind: Node
metadata:
  name: gpu-node-0
  labels:
    gpufleet.dev/pool: ml-research-only
""",
            ),
        ),
        team="ml-research",
    ),
    PR(
        "team-claims-namespace",
        "ml-research's team.yaml takes inference's namespace",
        (replace(f"{ML}/team.yaml", "namespaces: [ml-research]", "namespaces: [ml-research, inference]"),),
    ),
    PR(
        "team-reserved-namespace",
        "ml-research's team.yaml takes kube-system",
        (replace(f"{ML}/team.yaml", "namespaces: [ml-research]", "namespaces: [ml-research, kube-system]"),),
    ),
    PR(
        "team-fleet-namespace",
        "ml-research's team.yaml takes fleet-system, where fleet keeps its ledger",
        (replace(f"{ML}/team.yaml", "namespaces: [ml-research]", "namespaces: [ml-research, fleet-system]"),),
    ),
    PR(
        "team-operator-namespace",
        "ml-research's team.yaml takes the GPU Operator's namespace",
        (replace(f"{ML}/team.yaml", "namespaces: [ml-research]", "namespaces: [ml-research, gpu-operator]"),),
    ),
    PR(
        "forbidden-class",
        "inference asks for the vfio class it is not allowed",
        (write("teams/inference/vfio.yaml", template(name="vfio", namespace="inference", cls="vfio.gpu.nvidia.com")),),
    ),
    PR(
        "unknown-class",
        "ml-research names a DeviceClass nobody declares",
        (write(f"{ML}/b200.yaml", template(name="b200", cls="b200.nvidia.com")),),
    ),
    PR(
        "rogue-team-folder",
        "a new folder without team.yaml sneaks a template in",
        (write("teams/rogue/t.yaml", template(name="rogue", namespace="rogue")),),
    ),
    PR(
        "team-name-mismatch",
        "ml-research renames its Team to inference",
        (replace(f"{ML}/team.yaml", "name: ml-research", "name: inference"),),
    ),
    # --- selectors and CEL
    PR(
        "selector-matches-nothing",
        "ml-research selects a GPU model no pool has",
        (selector("b200", "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"),),
    ),
    PR(
        "removed-attribute-index",
        "ml-research selects by the removed attribute index",
        (selector("first-gpu", "device.attributes['gpu.nvidia.com'].index == 0"),),
    ),
    PR(
        "removed-attribute-pcie",
        "ml-research selects by the removed attribute pcieBusID",
        (selector("bus", "device.attributes['gpu.nvidia.com'].pcieBusID == '0000:00:01.0'"),),
    ),
    PR(
        "misspelt-attribute",
        "ml-research misspells productName",
        (selector("typo", "device.attributes['gpu.nvidia.com'].productNmae == 'NVIDIA H100 80GB HBM3'"),),
    ),
    PR(
        "cel-runtime-error",
        "ml-research compares driverVersion (a version) with a string",
        (selector("driver", "device.attributes['gpu.nvidia.com'].driverVersion >= '580.0.0'"),),
    ),
    PR(
        "cel-syntax",
        "ml-research writes a selector that does not compile",
        (selector("broken", "device.attributes['gpu.nvidia.com'].productName == "),),
    ),
    PR(
        "cel-too-long",
        "ml-research writes a 12 KiB selector",
        (selector("long", "device.driver == '" + "x" * 12000 + "'"),),
    ),
    # --- quota
    PR(
        "quota-split",
        "ml-research spreads 18 GPUs over three claims in three files (quota 16)",
        tuple(write(f"{ML}/part-{n}.yaml", template(name=f"part-{n}", count="6", kind="ResourceClaim")) for n in "abc"),
        team="ml-research",
    ),
    PR(
        "quota-one-request",
        "ml-research asks for 64 GPUs in one request",
        (write(f"{ML}/many.yaml", template(name="many", count="64")),),
    ),
    PR(
        "quota-all",
        "ml-research asks for every device of a class with a quota",
        (write(f"{ML}/all.yaml", template(name="all", request="allocationMode: All")),),
    ),
    # --- YAML and files
    PR("yaml-bomb", "a billion laughs in a team folder", (write(f"{ML}/bomb.yaml", BOMB),)),
    PR(
        "oversized",
        "a 2 MiB file in a team folder",
        (write_bytes(f"{ML}/huge.yaml", b"# " + b"x" * (2 * 1024 * 1024) + b"\n"),),
    ),
    PR("deep-nesting", "80 nested lists", (write(f"{ML}/deep.yaml", DEEP),)),
    PR("symlink-escape", "a symlink to a file outside the repository", (symlink(f"{ML}/passwd.yaml", "/etc/passwd"),)),
    PR(
        "symlink-relative-escape",
        "a relative symlink climbing out of the repository",
        (symlink(f"{ML}/up.yaml", "../../../../../../etc/hostname"),),
    ),
    PR(
        "duplicate-key",
        "a template with namespace twice (the second would win in kubectl)",
        (
            replace(
                f"{ML}/two-gpus.yaml",
                "  namespace: ml-research\n",
                "  namespace: ml-research\n  namespace: inference\n",
            ),
        ),
    ),
    PR(
        "merge-key",
        "a YAML merge key pulling in another mapping",
        (
            write(
                f"{ML}/merge.yaml",
                "base: &b {namespace: inference}\n"
                + template(name="merge").replace("  namespace: ml-research\n", "  <<: *b\n"),
            ),
        ),
    ),
    PR("non-utf8", "a Latin-1 file", (write_bytes(f"{ML}/latin1.yaml", template(name="caf\xe9").encode("latin-1")),)),
    PR(
        "yaml-ambiguous",
        "adminAccess: off (YAML 1.1 reads a boolean, 1.2 a string)",
        (write(f"{ML}/ambiguous.yaml", template(name="ambiguous", request="adminAccess: off")),),
    ),
    # --- duplicates
    PR(
        "duplicate-in-team",
        "the same template in two files",
        (write(f"{ML}/two-gpus-copy.yaml", template(name="two-gpus", count="2")),),
    ),
    PR(
        "duplicate-overlay-document",
        "an overlay folder defines a base template again",
        (write("overlays/gpu-east/single-gpu.yaml", template(name="single-gpu", namespace="ml-research")),),
    ),
    PR(
        "duplicate-overlay",
        "two overlays with the same name",
        (write("overlays/gpu-east-2/overlay.yaml", (EXAMPLE / "overlays/gpu-east/overlay.yaml").read_text()),),
    ),
    # --- names, fields, versions
    PR("invalid-name", "a template named GPU_Big", (write(f"{ML}/bad-name.yaml", template(name="GPU_Big")),)),
    PR(
        "invalid-request-name",
        "a request named gpu.0",
        (replace(f"{ML}/two-gpus.yaml", "- name: gpus", "- name: gpu.0"),),
    ),
    PR(
        "unknown-field",
        "deviceClassName misspelt",
        (replace(f"{ML}/two-gpus.yaml", "deviceClassName", "devicClassName"),),
    ),
    PR("wrong-type", "count as a string", (replace(f"{ML}/two-gpus.yaml", "count: 2", 'count: "2"'),)),
    PR(
        "status-field",
        "a template carrying status",
        (write(f"{ML}/status.yaml", template(name="status") + "status:\n  allocation: {}\n"),),
    ),
    PR(
        "wrong-api-version",
        "resource.k8s.io/v2",
        (replace(f"{ML}/two-gpus.yaml", "apiVersion: resource.k8s.io/v1", "apiVersion: resource.k8s.io/v2"),),
    ),
    PR(
        "deprecated-api-version",
        "resource.k8s.io/v1beta1 with the v1 shape",
        (replace(f"{ML}/two-gpus.yaml", "apiVersion: resource.k8s.io/v1", "apiVersion: resource.k8s.io/v1beta1"),),
    ),
    PR(
        "fleet-kind-version",
        "Team in fleet.gpufleet.dev/v2",
        (replace(f"{ML}/team.yaml", "fleet.gpufleet.dev/v1alpha1", "fleet.gpufleet.dev/v2"),),
    ),
    # --- overlays
    PR(
        "overlay-retarget-namespace",
        "an overlay moves inference's template into ml-research",
        (
            replace(
                "overlays/gpu-west/overlay.yaml",
                "  values:\n",
                """\
  - target:
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaimTemplate
      namespace: inference
      name: single-gpu
    patch:
      metadata:
        namespace: ml-research
  values:
""",
            ),
        ),
    ),
    PR(
        "overlay-team-reserved",
        "an overlay adds kube-system to inference's namespaces",
        (
            replace(
                "overlays/gpu-east/overlay.yaml",
                "          gpu.nvidia.com: 32\n",
                "          gpu.nvidia.com: 32\n        namespaces: [inference, kube-system]\n",
            ),
        ),
    ),
    PR(
        "overlay-missing-target",
        "an overlay patches a template that does not exist",
        (
            replace(
                "overlays/gpu-west/overlay.yaml",
                "  values:\n",
                """\
  - target:
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaimTemplate
      namespace: ml-research
      name: no-such-template
    patch:
      spec: {}
  values:
""",
            ),
        ),
    ),
    PR(
        "overlay-forbidden-class",
        "an overlay points inference's template at a forbidden class",
        (
            replace(
                "overlays/gpu-east/overlay.yaml",
                "  - target:\n      apiVersion: fleet.gpufleet.dev/v1alpha1\n      kind: Team\n",
                """\
  - target:
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaimTemplate
      namespace: inference
      name: single-gpu
    patch:
      spec:
        spec:
          devices:
            requests:
            - name: gpu
              exactly:
                deviceClassName: vfio.gpu.nvidia.com
  - target:
      apiVersion: fleet.gpufleet.dev/v1alpha1
      kind: Team
""",
            ),
        ),
    ),
)


def _git(repo: Path, *args: str) -> bytes:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "hostile",
        "GIT_AUTHOR_EMAIL": "h@example.com",
        "GIT_COMMITTER_NAME": "hostile",
        "GIT_COMMITTER_EMAIL": "h@example.com",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True).stdout


def _diff(pr: PR, scratch: Path) -> tuple[bytes, Path]:
    repo = scratch / pr.name
    shutil.copytree(EXAMPLE, repo, symlinks=True)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "example")
    for edit in pr.edits:
        edit(repo)
    _git(repo, "add", "-A")
    return _git(repo, "diff", "--cached", "--binary"), repo


def _findings(repo: Path) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "fleetctl", "validate", str(repo), "-o", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if result.returncode != 1:
        raise SystemExit(f"{repo.name}: validate exited {result.returncode}: {result.stdout}{result.stderr}")
    seen: dict[tuple[str, str, int], str] = {}
    for f in json.loads(result.stdout)["findings"]:
        if f["severity"] == "error":
            file = str(Path(f["file"]).relative_to(repo)) if Path(f["file"]).is_absolute() else f["file"]
            seen.setdefault((f["rule"], file, f["line"]), f["message"])
    return [f"Expect: {rule} {file}:{line} {message}" for (rule, file, line), message in sorted(seen.items())]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", action="store_true")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    chosen = [p for p in PRS if not args.names or p.name in args.names]
    with tempfile.TemporaryDirectory() as scratch:
        for number, pr in enumerate(PRS, start=1):
            if pr not in chosen:
                continue
            diff, repo = _diff(pr, Path(scratch))
            target = CORPUS / f"{number:02d}-{pr.name}.diff"
            if args.record:
                expects = _findings(repo)
            else:
                old = target.read_bytes().decode("utf-8", "replace")
                expects = [line for line in old.splitlines() if line.startswith("Expect: ")]
            header = [f"Subject: {pr.subject}", *([f"Team: {pr.team}"] if pr.team else []), *expects]
            target.write_bytes(("\n".join(header) + "\n\n").encode() + diff)
            print(target.name, *expects, sep="\n  ")


if __name__ == "__main__":
    main()
