"""``fleetctl demo``: the whole GitOps flow on the sandbox, driven by the in-cluster controller.

1. Starts the sandbox (a real control plane) with the GPU nodes the chosen cluster of
   the example repository expects (``examples/sandbox/<cluster>.yaml``: 16 H100,
   4 A100 and 2 H200 nodes for gpu-east) and validates the example fleet.
2. Pushes the example to a repository ``fleet/fleet`` on the sandbox's git forge (a real
   Gitea on loopback, ``fleet.sandbox.forges``), and starts ``fleet-controller`` against
   it as part of the sandbox (``fleetctl sandbox down`` stops it too): it clones over
   HTTP with a token and posts each revision's outcome as a commit status. Then waits as
   ``kubectl wait --for=condition=Ready fleetsync/...``.
3. A team's change is a real pull request, opened through Gitea's API. CI's comment,
   ``fleetctl diff -o markdown``, is posted on it and updated in place after a second
   push (docs/validate.md has the Gitea Actions job). The pull request is merged
   through the API; Gitea's own signed push webhook tells the controller, which applies
   the merge within seconds and marks it ``success`` on the commit.
4. A bad commit (a template naming a device class its team may not use) is
   rejected: ``fleetctl status`` and the commit's ``failure`` status name its file,
   line and rule, and the cluster keeps the last good revision.
5. Schedules the guide's single-GPU pod with a team's template (the DRA path), and
   prints how to look around: status, metrics, traces, logs.

Each step prints the command it stands for, so the demo doubles as a tutorial.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from fleet.sandbox import binaries, charts, clusters, credentials, forges, identities, profiles
from fleet.sandbox.operators import StandInOperator
from fleetctl import cli
from fleetctl.commands import sandbox

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "fleet"
PROFILES = EXAMPLE.parent / "sandbox"
UPSTREAM = charts.Upstream(ROOT / "tests" / "data" / "gpu-operator")
"""NVIDIA's gpu-operator v26.7.0, vendored in the checkout beside the example (the demo runs from one)."""
CRD = ROOT / "overlays" / "base" / "fleetsync-crd.yaml"
SECRET = "fleet-demo-webhook-secret"
REPOSITORY = f"{forges.ADMIN}/fleet"
"""The example fleet's repository on the sandbox's forge."""
NEW_TEMPLATE = """\
# Added by a pull request of the ml-research team: two GPUs of the same model.
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: two-h100
  namespace: ml-research
spec:
  spec:
    devices:
      requests:
        - name: gpus
          exactly:
            deviceClassName: gpu.nvidia.com
            count: 2
            selectors:
              - cel:
                  expression: device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'
"""
BAD_TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: passthrough
  namespace: inference
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: vfio.gpu.nvidia.com
"""


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="sandbox + local git repository + fleet-controller: apply, a merged PR, a rejected bad commit",
        description="Run fleet end to end on the local sandbox: the controller follows a local git repository "
        "made from the example fleet.",
    )
    parser.add_argument("repo", nargs="?", type=Path, default=EXAMPLE, help="fleet repository (default: the example)")
    parser.add_argument("--cluster", default="gpu-east", help="which Cluster of the repository the sandbox plays")
    parser.set_defaults(func=_demo)


def _step(title: str, argv: list[str]) -> int:
    print(f"\n$ fleetctl {shlex.join(argv)}", flush=True)
    code = cli.run(argv)
    if code == 130:
        raise KeyboardInterrupt  # Ctrl-C in a step ends the demo, not just the step
    print(f"  ({title}: exit {code})", flush=True)
    return code


def _say(text: str) -> None:
    print(f"\n# {text}", flush=True)


def _git(cwd: Path, *args: str, token: str = "") -> str:
    """git in ``cwd``; with ``token``, HTTP requests carry it (an environment setting, never argv or .git/config)."""
    argv = ["git", "-c", "user.name=fleet demo", "-c", "user.email=demo@fleet.invalid", *args]
    env = dict(os.environ)
    if token:
        login = base64.b64encode(f"{forges.ADMIN}:{token}".encode()).decode()
        env |= {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: Basic {login}"}  # fmt: skip
    done = subprocess.run(argv, cwd=cwd, check=True, capture_output=True, text=True, timeout=60, env=env)
    return done.stdout.strip()


def _shell(cwd: Path, command: str, *, token: str = "") -> str:
    print(f"$ {command}", flush=True)
    return _git(cwd, *shlex.split(command)[1:], token=token)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _demo(args: argparse.Namespace) -> int:
    profile = PROFILES / f"{args.cluster}.yaml"
    sb = sandbox.up(directory=None, profile=profiles.load(profile if profile.exists() else None), forge=True)
    found = binaries.locate()
    if found is None:
        print("the sandbox binaries are not built: run fleetctl sandbox build", file=sys.stderr)
        return 2
    with (
        tempfile.TemporaryDirectory(prefix="fleet-demo-") as tmp,
        charts.serve(Path(tmp) / "charts", helm=found["helm"], upstream=UPSTREAM) as url,
    ):
        repo = Path(tmp) / "fleet"
        shutil.copytree(args.repo, repo)
        overlay = repo / "overlays" / "zz-sandbox" / "overlay.yaml"
        overlay.parent.mkdir(parents=True, exist_ok=True)
        overlay.write_text(sandbox_overlay(cluster=args.cluster, chart_repository=url))
        print(
            f"serving NVIDIA's gpu-operator chart {charts.RELEASED} at {url}; {overlay.relative_to(repo)} points "
            "the example at it (the operator's controller is played: the sandbox has no GPUs)",
            flush=True,
        )
        with StandInOperator(sb, upstream=UPSTREAM):
            return _flow(args, sb, repo=repo, helm=found["helm"])


CONSOLE_VIEWER = ROOT / "overlays" / "console" / "viewer-role.yaml"


def console_rbac(repo: Path) -> dict[str, Any]:
    """What a platform team binds for the console (docs/console.md), for the example fleet: everyone
    logged in sees the fleet (``fleet-console-viewer``), the admins ``view`` everything, and each
    team's owner groups ``view`` in the team's namespaces."""
    groups = {identities.ADMINS}
    items: list[dict[str, Any]] = []
    for path in sorted(repo.glob("teams/*/team.yaml")):
        spec = (yaml.safe_load(path.read_text()) or {}).get("spec") or {}
        owners = [o["name"] for o in spec.get("owners") or () if o.get("kind") == "Group"]
        groups.update(owners)
        for ns in spec.get("namespaces") or ():
            subjects = [{"kind": "Group", "name": g, "apiGroup": "rbac.authorization.k8s.io"} for g in owners]
            items.append(_binding("RoleBinding", "fleet-console-view", "view", subjects, namespace=ns))
    everyone = [{"kind": "Group", "name": g, "apiGroup": "rbac.authorization.k8s.io"} for g in sorted(groups)]
    admins = [{"kind": "Group", "name": identities.ADMINS, "apiGroup": "rbac.authorization.k8s.io"}]
    items.append(_binding("ClusterRoleBinding", "fleet-console-viewers", "fleet-console-viewer", everyone))
    items.append(_binding("ClusterRoleBinding", "fleet-console-admins", "view", admins))
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _binding(kind: str, name: str, role: str, subjects: list[dict[str, str]], namespace: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
    api = "rbac.authorization.k8s.io/v1"
    return {"apiVersion": api, "kind": kind, "metadata": meta, "roleRef": ref, "subjects": subjects}


def _console(sb: clusters.Sandbox, *, repo: Path, url: str) -> None:
    """Bind the console's viewers and say how to log in, as the admin and as a team member."""
    forge = sb.forge
    assert forge is not None
    _say(f"the console: the fleet, its GPUs and teams in a browser, at {url}")
    print(f"$ kubectl apply -f {CONSOLE_VIEWER.relative_to(ROOT)}  # and bindings for the admins and the teams")
    sb.kubectl("apply", "-f", str(CONSOLE_VIEWER))
    sb.kubectl("apply", "-f", "-", stdin=json.dumps(console_rbac(repo)))
    passwords = identities.passwords(forge)
    print(f"  open {url}/ and log in through Gitea:")
    admin = forges.ADMIN
    print(f"    as the admin:       {admin} / {passwords[admin]}  (group {identities.ADMINS}: sees everything)")
    for person in identities.PEOPLE:
        if person.name != forges.ADMIN:
            print(f"    as a team member:   {person.name} / {passwords[person.name]}  (group {', '.join(person.orgs)})")
    print("  or, on this machine with your kubeconfig: fleetctl console")


def sandbox_overlay(*, cluster: str, chart_repository: str) -> str:
    """The overlay that points the repository's GPUOperator at the sandbox's chart repository."""
    overlay = {
        "apiVersion": "fleet.gpufleet.dev/v1alpha1",
        "kind": "Overlay",
        "metadata": {"name": "zz-sandbox"},
        "spec": {
            "clusters": {"names": [cluster]},
            "patches": [
                {
                    "target": {
                        "apiVersion": "fleet.gpufleet.dev/v1alpha1",
                        "kind": "GPUOperator",
                        "name": "gpu-operator",
                    },
                    "patch": {"spec": {"chart": {"repository": chart_repository}}},
                }
            ],
        },
    }
    header = "# Written by fleetctl demo: install the GPU Operator from the sandbox's loopback chart repository.\n"
    return header + json.dumps(overlay, indent=2) + "\n"


def _flow(args: argparse.Namespace, sb: clusters.Sandbox, *, repo: Path, helm: Path) -> int:
    """The controller's flow on ``repo`` (the example plus the sandbox overlay); the operator stage uses ``helm``."""
    target = ["--cluster", args.cluster, "--kubeconfig", str(sb.kubeconfig), "--context", credentials.CLUSTER]
    target += ["--helm", str(helm)]
    if _step("validate", ["validate", str(repo), "--cluster", args.cluster]) != 0:
        return 1
    if _step("diff before apply: changes expected", ["diff", str(repo), *target]) not in (0, 1):
        return 1

    forge = sb.forge
    assert forge is not None  # the demo starts the sandbox with its forge
    api, token = forge.api(), forge.token
    _say(f"the example fleet as a repository on the sandbox's git forge, Gitea at {forge.url}")
    print(f'$ curl -X POST {forge.url}api/v1/user/repos -d \'{{"name": "fleet"}}\'', flush=True)
    api.create_repository("fleet", description="the example GPU fleet")
    git_dir = sb.directory / "git"
    shutil.rmtree(git_dir, ignore_errors=True)
    work = git_dir / "work"
    shutil.copytree(repo, work)
    _git(work, "init", "-q", "-b", "main")
    _git(work, "remote", "add", "origin", forge.clone_url(REPOSITORY))
    _git(work, "add", "-A")
    _shell(work, "git commit -q -m 'the example fleet'")
    _shell(work, "git push -q origin main", token=token)

    port = _free_port()
    secret_file = git_dir / "webhook-secret"
    secret_file.write_text(SECRET)
    print(f"$ curl -X POST {forge.url}api/v1/repos/{REPOSITORY}/hooks  # push events to the controller, signed")
    api.add_webhook(REPOSITORY, url=f"http://127.0.0.1:{port}/webhook", secret=SECRET, branch="main")
    sb.kubectl("apply", "-f", str(CRD))
    sb.kubectl("wait", "--for=condition=Established", "crd/fleetsyncs.fleet.gpufleet.dev", "--timeout=60s")
    console_url = f"http://127.0.0.1:{port}/ui"
    oidc = identities.register(forge, redirect_uris=(f"{console_url}/login/callback",))
    oidc_secret = git_dir / "console-client-secret"
    oidc_secret.write_text(oidc.client_secret)
    oidc_secret.chmod(0o600)
    print(f"$ curl -X POST {forge.url}api/v1/user/applications/oauth2  # the console's OIDC client on Gitea")
    argv = [
        sys.executable, "-m", "fleet.controller",
        "--repo", forge.clone_url(REPOSITORY), "--ref", "main", "--cluster", args.cluster,
        "--git-token-file", str(forge.token_file),
        "--commit-status-token-file", str(forge.token_file), "--commit-status-provider", "gitea",
        "--kubeconfig", str(sb.kubeconfig), "--context", credentials.CLUSTER,
        "--interval", "30s", "--listen", f"127.0.0.1:{port}",
        "--webhook-secret-file", str(secret_file), "--state-dir", str(sb.directory / "controller"),
        "--helm", str(helm), "--team-impersonation", "required",
        "--console", "oidc", "--console-url", console_url, "--console-oidc-issuer", oidc.issuer,
        "--console-oidc-client-id", oidc.client_id, "--console-oidc-client-secret-file", str(oidc_secret),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env.setdefault("OTEL_TRACES_EXPORTER", "console")
    print(f"\n$ fleet-controller {shlex.join(argv[3:])} &", flush=True)
    controller = clusters.attach(sb, name="fleet-controller", argv=argv, env=env)
    print(f"  (running as pid {controller.pid}, log {controller.log}; `fleetctl sandbox down` stops it)")

    if _until(lambda: _attempted(sb, args.cluster) != "", within=60) is None:
        print(f"the controller wrote no FleetSync within 60 s; its log: {controller.log}", file=sys.stderr)
        return 1
    print(f"\n$ kubectl wait --for=condition=Ready fleetsync/{args.cluster} --timeout=300s", flush=True)
    waited = sb.kubectl(
        "wait", "--for=condition=Ready", f"fleetsync/{args.cluster}", "--timeout=300s", check=False, timeout=330
    )
    print(waited.stdout.strip() or waited.stderr.strip())
    if waited.returncode != 0:
        print(f"the controller did not get Ready; its log: {controller.log}", file=sys.stderr)
        return 1
    print(sb.kubectl("get", "fleetsyncs").stdout.rstrip())
    if not _show_status(api, _git(work, "rev-parse", "HEAD"), cluster=args.cluster, want="success"):
        return 1
    if _step("diff after the controller applied: nothing left", ["diff", str(repo), *target]) != 0:
        return 1

    _say("a pull request of the ml-research team adds a claim template")
    branch = "ml-research/two-h100"
    _shell(work, f"git checkout -q -b {branch}")
    (work / "teams" / "ml-research" / "two-h100.yaml").write_text(NEW_TEMPLATE.replace("count: 2", "count: 1"))
    _git(work, "add", "-A")
    _shell(work, "git commit -q -m 'ml-research: an H100 claim template'")
    _shell(work, f"git push -q origin {branch}", token=token)
    print(f'$ curl -X POST {forge.url}api/v1/repos/{REPOSITORY}/pulls -d \'{{"head": "{branch}", ...}}\'')
    pull = api.open_pull(REPOSITORY, head=branch, base="main", title="ml-research: a two-H100 claim template")
    number = int(pull["number"])
    print(f"  pull request #{number}: {pull['html_url']}")
    comment = _ci_comment(api, work, number=number, target=target)
    _say("a second push to the pull request: CI updates its comment in place")
    (work / "teams" / "ml-research" / "two-h100.yaml").write_text(NEW_TEMPLATE)
    _git(work, "add", "-A")
    _shell(work, "git commit -q -m 'ml-research: two GPUs of the same model'")
    _shell(work, f"git push -q origin {branch}", token=token)
    if _ci_comment(api, work, number=number, target=target) != comment:
        print("CI's second run posted a second comment instead of updating the first", file=sys.stderr)
        return 1
    count = len(api.comments(REPOSITORY, number))
    print(f"  comment {comment} updated in place ({count} comment on the pull request)")

    _say("the pull request is merged; Gitea sends its signed push webhook to the controller")
    print(f'$ curl -X POST {forge.url}api/v1/repos/{REPOSITORY}/pulls/{number}/merge -d \'{{"Do": "merge"}}\'')
    merged_at = time.monotonic()
    api.merge_pull(REPOSITORY, number, message=f"Merge pull request #{number} from {branch}")
    _shell(work, "git checkout -q main")
    _shell(work, "git pull -q origin main", token=token)
    merged = _git(work, "rev-parse", "HEAD")
    if _until(lambda: _exists(sb, "resourceclaimtemplate", "two-h100", "ml-research"), within=60) is None:
        print("the merged template was not applied within 60 s", file=sys.stderr)
        return 1
    print(f"  resourceclaimtemplate ml-research/two-h100 applied {time.monotonic() - merged_at:.1f} s after the merge")
    if not _show_status(api, merged, cluster=args.cluster, want="success"):
        return 1

    _say("a bad commit: inference asks for vfio.gpu.nvidia.com, a device class it may not use")
    before = _versions(sb)
    (work / "teams" / "inference" / "passthrough.yaml").write_text(BAD_TEMPLATE)
    _git(work, "add", "-A")
    _shell(work, "git commit -q -m 'inference: GPU passthrough'")
    _shell(work, "git push -q origin main", token=token)
    bad = _git(work, "rev-parse", "HEAD")
    if _until(lambda: _attempted(sb, args.cluster) == bad, within=60) is None:
        print("the controller did not look at the bad commit within 60 s", file=sys.stderr)
        return 1
    _step("the revision is rejected with its file and line", ["status", "--cluster", args.cluster, *target[2:6]])
    if not _show_status(api, bad, cluster=args.cluster, want="failure"):
        return 1
    same = _versions(sb) == before and not _exists(sb, "resourceclaimtemplate", "passthrough", "inference")
    print(f"  cluster unchanged (every managed object's resourceVersion): {'yes' if same else 'NO'}")
    if not same:
        return 1
    code = _gpu_pod(sb)
    _console(sb, repo=repo, url=console_url)
    print(
        "\nLook around (the sandbox, its forge and the controller keep running):\n"
        f"  export KUBECONFIG={sb.kubeconfig}\n"
        f"  fleetctl status                                   # FleetSync: revisions, conditions, findings, drift\n"
        f"  kubectl get fleetsyncs; kubectl get events --field-selector involvedObject.name={args.cluster}\n"
        f"  open {console_url}/                     # the console (log in as above)\n"
        f"  curl -s http://127.0.0.1:{port}/metrics | grep ^fleet_   # reconciles, drift, git fetches, loop lag\n"
        f"  less {controller.log}   # log and trace spans (OTEL_TRACES_EXPORTER=console; otlp for a collector)\n"
        '  eval "$(fleetctl sandbox env)"   # FLEET_FORGE_URL, FLEET_FORGE_TOKEN: the pull request, statuses\n'
        f'  curl -H "Authorization: token $FLEET_FORGE_TOKEN" '
        f"$FLEET_FORGE_URL/api/v1/repos/{REPOSITORY}/commits/{bad}/statuses\n"
        "  fleetctl sandbox down                             # stops the controller, the forge and the sandbox"
    )
    return code


def _ci_comment(api: forges.Api, work: Path, *, number: int, target: list[str]) -> int:
    """What CI does on each push of a pull request: ``fleetctl diff -o markdown``, posted as one comment
    that later runs edit (found by its marker); returns the comment's id."""
    argv = ["diff", str(work), *target, "-o", "markdown", "--base", "main"]
    print(f"\n$ fleetctl {shlex.join(argv)} > comment.md   # CI (docs/validate.md: Gitea Actions)", flush=True)
    done = subprocess.run(
        [sys.executable, "-m", "fleetctl", *argv], capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"fleetctl diff failed: {done.stderr.strip()}")
    body = done.stdout
    marker = body.splitlines()[0]
    comments = api.comments(REPOSITORY, number)
    found = [c for c in comments if str(c.get("body", "")).startswith(marker)]
    if found:
        comment = int(found[0]["id"])
        print(f"$ curl -X PATCH {api.url}api/v1/repos/{REPOSITORY}/issues/comments/{comment} -d @comment.md")
        api.call("PATCH", f"/repos/{REPOSITORY}/issues/comments/{comment}", {"body": body})
        return comment
    print(f"$ curl -X POST {api.url}api/v1/repos/{REPOSITORY}/issues/{number}/comments -d @comment.md")
    return int(api.call("POST", f"/repos/{REPOSITORY}/issues/{number}/comments", {"body": body})["id"])


def _show_status(api: forges.Api, sha: str, *, cluster: str, want: str) -> bool:
    """Wait for the controller's commit status on ``sha`` to be ``want``; print it as the forge shows it."""
    context = f"fleet/{cluster}"

    def latest() -> dict[str, Any]:
        mine = [s for s in api.statuses(REPOSITORY, sha) if s.get("context") == context]
        return mine[0] if mine and mine[0].get("status") == want else {}

    print(f"$ curl {api.url}api/v1/repos/{REPOSITORY}/commits/{sha[:12]}…/statuses", flush=True)
    if _until(lambda: latest(), within=60) is None:
        print(f"no {want} commit status {context} on {sha[:12]} within 60 s", file=sys.stderr)
        return False
    status = latest()
    print(f"  {context}: {status.get('status')} — {status.get('description')}")
    return True


def _until(check: Any, *, within: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < within:
        if check():
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def _exists(sb: clusters.Sandbox, kind: str, name: str, namespace: str) -> bool:
    return sb.kubectl("get", kind, name, "-n", namespace, check=False).returncode == 0


def _attempted(sb: clusters.Sandbox, cluster: str) -> str:
    got = sb.kubectl("get", "fleetsync", cluster, "-o", "json", check=False)
    if got.returncode != 0:
        return ""
    return str((json.loads(got.stdout).get("status") or {}).get("lastAttemptedRevision") or "")


def _versions(sb: clusters.Sandbox) -> dict[str, str]:
    kinds = "namespaces,roles,rolebindings,resourcequotas,deviceclasses,resourceclaimtemplates"
    items = json.loads(sb.kubectl("get", kinds, "-A", "-l", "app.kubernetes.io/managed-by=fleet", "-o", "json").stdout)[
        "items"
    ]
    return {f"{o['kind']}/{o['metadata'].get('namespace')}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in items}  # fmt: skip


def _gpu_pod(sb: clusters.Sandbox) -> int:
    """Schedule the guide's pod in a team namespace with the team's single-gpu template."""
    namespaces = json.loads(sb.kubectl("get", "resourceclaimtemplates", "-A", "-o", "json").stdout)["items"]
    owned = [t for t in namespaces if t["metadata"]["name"] == "single-gpu"]
    if not owned:
        print("no single-gpu template was applied; skipping the pod", file=sys.stderr)
        return 1
    ns = owned[0]["metadata"]["namespace"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "gpu-pod", "namespace": ns},
        "spec": {
            "restartPolicy": "Never",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            "containers": [
                {
                    "name": "workload",
                    "image": "ubuntu:22.04",
                    "command": ["bash", "-c"],
                    "args": ["nvidia-smi -L; sleep 3600"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }
    _say("the guide's pod, with the team's template: the real scheduler allocates a simulated GPU")
    print(f"$ kubectl apply -n {ns} -f gpu-pod.yaml", flush=True)
    sb.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        p = json.loads(sb.kubectl("get", "pod", "gpu-pod", "-n", ns, "-o", "json").stdout)
        if p["status"].get("phase") == "Running":
            break
        time.sleep(0.5)
    print(sb.kubectl("get", "pod,resourceclaim", "-n", ns, "-o", "wide").stdout)
    claims = json.loads(sb.kubectl("get", "resourceclaims", "-n", ns, "-o", "json").stdout)["items"]
    for c in claims:
        for r in c.get("status", {}).get("allocation", {}).get("devices", {}).get("results", []):
            print(f"claim {c['metadata']['name']}: {r['driver']} pool {r['pool']} device {r['device']}")
    return 0 if claims else 1
