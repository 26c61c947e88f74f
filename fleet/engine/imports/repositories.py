"""Writing an imported cluster into a repository: new, or one more cluster of an existing fleet.

Files are written for people with ruamel.yaml, each object under a comment that
says where it came from. The files are laid out in a staging copy and validated
there exactly as ``fleetctl validate`` would (``fleet.engine.pipelines``) before any
is copied in. A cluster often holds an object ``validate`` rightly refuses (a template
that selects on an attribute the driver no longer publishes): that file is written
all the same, as the cluster holds it, and is ``Refused`` with its findings (IMPORT.md
lists them) so the user fixes or removes it; the plan the take-over applies is that of
the repository without the refused files, so fleet never marks an object it would then
refuse to apply. Only findings in files the import did not write (an existing fleet's,
or ``fleet.yaml`` and the Cluster it must write) refuse the import as a whole, and then
the target directory is left as it was.

An existing directory is a fleet's when it holds ``fleet.yaml``; the import then adds
the cluster to ``spec.clusters`` and may write a file that exists only when it
declares the same object (for a pool or a team, the same spec but for
``spec.clusters.names``, which gains the cluster). Anything else is a different
fleet, and refused with the file that differs. A directory with files but no
``fleet.yaml`` is not a fleet repository at all, and refused too.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML

from fleet.engine import pipelines, plans
from fleet.engine.imports.mappings import Document, Imported, Unmapped
from fleet.errors import FleetError
from fleet.manifests import Finding

REPORT = "IMPORT.md"


def _yaml() -> YAML:
    """Round-trip YAML: for the files of an existing fleet, whose comments and layout are kept."""
    out = YAML()
    out.indent(mapping=2, sequence=2, offset=0)
    out.width = 120
    return out


def _emitter() -> YAML:
    """ruamel.yaml's C emitter (ruamel.yaml.clib) for new files: keys in the order given, lists as the
    examples write them. The round-trip dumper, all Python, took most of an import of 2,000 templates."""
    out = YAML(typ="safe", pure=False)
    out.default_flow_style = False
    out.width = 120
    out.representer.sort_base_mapping_type_on_output = False
    return out


def render(doc: Document, *, emitter: YAML | None = None) -> str:
    """The file's text: the origin comment, then the object."""
    buf = io.StringIO()
    (emitter or _emitter()).dump(doc.body, buf)
    header = "".join(f"# {line}\n" for line in _wrapped(f"Imported by fleetctl import: {doc.comment}."))
    return header + buf.getvalue()


def _wrapped(text: str, width: int = 100) -> Iterator[str]:
    line = ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            yield line
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        yield line


def report(unmapped: list[Unmapped], *, cluster: str, context: str) -> str:
    """IMPORT.md's section for one cluster: what the repository does not declare, and why."""
    lines = [f"## cluster {cluster} (context {context})", ""]
    if not unmapped:
        lines.append("Everything fleet manages was imported.")
    else:
        lines += ["| not imported | why |", "|---|---|"]
        lines += [f"| {u.what} | {u.reason.replace('|', '/')} |" for u in unmapped]
    return "\n".join(lines) + "\n"


REPORT_HEADER = (
    "# What `fleetctl import` could not map\n\n"
    "Each row is something in the cluster this repository does not declare: fleet leaves it as it is.\n\n"
)


def plan(root: Path, imported: Imported, *, cluster: str, fleet: str | None, context: str) -> dict[str, str]:
    """Relative path → text of every file to write; FleetError when ``root`` holds something else."""
    existing = _existing_fleet(root)
    emitter = _emitter()
    files: dict[str, str] = {}
    for doc in imported.documents:
        if doc.path == "fleet.yaml" and existing is not None:
            files[doc.path] = _with_cluster(root / "fleet.yaml", existing, cluster=cluster, fleet=fleet)
            continue
        if doc.path == "fleet.yaml" and fleet:
            doc.body["metadata"]["name"] = fleet
        target = root / doc.path
        if existing is not None and target.exists():
            files[doc.path] = _merged(root, target, doc, cluster=cluster)
            continue
        files[doc.path] = render(doc, emitter=emitter)
    section = report(imported.unmapped, cluster=cluster, context=context)
    old = (root / REPORT).read_text() if existing is not None and (root / REPORT).exists() else REPORT_HEADER
    files[REPORT] = old.rstrip("\n") + "\n\n" + section
    return files


def _existing_fleet(root: Path) -> dict[str, Any] | None:
    if not root.exists():
        return None
    if not root.is_dir():
        raise FleetError(
            f"{root} is not a directory", hint="pass a directory for the repository (it may not exist yet)"
        )
    manifest = root / "fleet.yaml"
    if not manifest.exists():
        if any(p.name != ".git" for p in root.iterdir()):
            raise FleetError(
                f"{root} holds files but no fleet.yaml: it is not a fleet repository; nothing was written",
                hint="import into an empty or new directory, or into the checkout of the fleet to add the cluster to",
            )
        return None
    data = yaml.safe_load(manifest.read_text())
    if not isinstance(data, dict) or data.get("kind") != "Fleet":
        raise FleetError(
            f"{manifest} is not a Fleet; nothing was written",
            hint="import into an empty directory, or a fleet's checkout",
        )
    return data


def _with_cluster(path: Path, data: dict[str, Any], *, cluster: str, fleet: str | None) -> str:
    name = str((data.get("metadata") or {}).get("name"))
    if fleet and fleet != name:
        raise FleetError(
            f"{path.parent} holds a different fleet: {name!r}, not {fleet!r}; nothing was written",
            where=f"{path}:1",
            hint=f"import into another directory, or leave out --fleet to add the cluster to fleet {name!r}",
        )
    clusters = list(((data.get("spec") or {}).get("clusters")) or [])
    if cluster in clusters:
        raise FleetError(
            f"cluster {cluster!r} is already in fleet {name!r}; nothing was written",
            where=str(path),
            hint="pass another --cluster name, or import into an empty directory",
        )
    rt = _yaml()
    doc = rt.load(path.read_text())
    doc["spec"]["clusters"].append(cluster)
    buf = io.StringIO()
    rt.dump(doc, buf)
    return buf.getvalue()


def _merged(root: Path, path: Path, doc: Document, *, cluster: str) -> str:
    """The existing file, with ``cluster`` added to its selector when it declares the same object."""
    rt = _yaml()
    text = path.read_text()
    current = rt.load(text)
    mine = _comparable(doc.body)
    theirs = _comparable(_plain(current))
    if mine != theirs:
        raise FleetError(
            f"{root} holds a different fleet: {path.relative_to(root)} declares {doc.body['kind']} "
            f"{doc.body['metadata']['name']} otherwise than the cluster has it; nothing was written",
            where=f"{path}:1",
            hint="import into an empty directory and compare, or make the cluster match the fleet first",
        )
    names = (((current.get("spec") or {}).get("clusters") or {}).get("names")) if isinstance(current, dict) else None
    if isinstance(names, list) and cluster not in names:
        names.append(cluster)
        buf = io.StringIO()
        rt.dump(current, buf)
        return buf.getvalue()
    return text


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


def _comparable(body: dict[str, Any]) -> dict[str, Any]:
    out = _plain(body)
    spec = out.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("clusters"), dict):
        spec = {**spec, "clusters": {k: v for k, v in spec["clusters"].items() if k != "names"}}
        out = {**out, "spec": spec}
    return out  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Refused:
    """A file the import wrote that ``validate`` refuses, with the findings: fleet neither applies nor
    takes over its object until the file is fixed or removed."""

    file: str
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class Written:
    plan: plans.Plan
    """The plan of the repository without the refused files: what the take-over applies."""
    refused: tuple[Refused, ...] = ()


MAX_ROUNDS = 3
"""Files refused, then the repository without them checked again: a Team refused takes its templates
along in the second round; more rounds than this is no cluster but an import bug."""

REFUSED_HEADER = (
    "### Files that need a fix before fleet applies this repository\n\n"
    "`fleetctl validate` refuses these files. Each is written as the cluster holds its object; fleet "
    "neither applies nor takes over that object until the file is fixed (or removed, which leaves the "
    "object as it is).\n\n| file | finding | hint |\n|---|---|---|\n"
)


def refused_report(refused: tuple[Refused, ...]) -> str:
    """IMPORT.md's rows for the refused files: one per finding, with its hint."""
    if not refused:
        return ""
    rows = [
        f"| {f.location} | {f.rule}: {f.message} | {f.hint or '-'} |".replace("\n", " ")
        for r in refused
        for f in r.findings
    ]
    return "\n" + REFUSED_HEADER + "\n".join(rows) + "\n"


def write(root: Path, files: dict[str, str], *, cluster: str) -> Written:
    """Validate ``files`` laid over ``root`` in a staging copy, then write them into ``root``.

    The plan is the staging copy's (without the refused files): the same files, so the same objects,
    sources (relative to the root) and ledger keys; only a revision id may differ, which the diff ignores.

    A new ``root`` is the staging directory itself, renamed into place (it sits beside ``root``,
    on the same file system): the files are written once."""
    fresh = not root.exists() or not any(root.iterdir())
    parent = root.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    files = dict(files)
    with tempfile.TemporaryDirectory(prefix=f".{root.name}.import-", dir=parent if fresh else None) as tmp:
        staged = Path(tmp) / "repo"
        if not fresh:
            shutil.copytree(root, staged, ignore=shutil.ignore_patterns(".git"))
        _lay(staged, files)
        checked = pipelines.check_and_plan(staged, cluster=cluster)
        refused: tuple[Refused, ...] = ()
        plan = checked.plan
        if plan is None:
            plan, refused = _without_refused(staged, files, checked.findings, cluster=cluster, scratch=Path(tmp))
            files[REPORT] = files[REPORT] + refused_report(refused)
            _lay(staged, {REPORT: files[REPORT]})
        if fresh:
            if root.exists():
                root.rmdir()  # empty: checked above
            staged.rename(root)
            return Written(plan, refused)
    _lay(root, files)
    return Written(plan, refused)


def _without_refused(
    staged: Path, files: dict[str, str], findings: tuple[Finding, ...], *, cluster: str, scratch: Path
) -> tuple[plans.Plan, tuple[Refused, ...]]:
    """The plan of ``staged`` without the files validate refuses, and those files; FleetError (nothing
    written) when a refused file is none the import may leave to the user."""
    refused: dict[str, list[Finding]] = defaultdict(list)
    for _ in range(MAX_ROUNDS):
        errors = [f for f in findings if f.severity == "error"]
        hit = {f.location.file for f in errors}
        if not errors or not hit <= _leavable(files):
            break
        for f in errors:
            refused[f.location.file].append(f)
        rest = scratch / "validated"
        shutil.rmtree(rest, ignore_errors=True)
        shutil.copytree(staged, rest)
        for rel in refused:
            (rest / rel).unlink()
        checked = pipelines.check_and_plan(rest, cluster=cluster)
        if checked.plan is not None:
            return checked.plan, tuple(Refused(rel, tuple(fs)) for rel, fs in sorted(refused.items()))
        findings = checked.findings
    errors = [f for f in findings if f.severity == "error"]
    shown = "\n  ".join(str(f.location) + f" {f.rule} {f.message}" for f in errors[:10])
    more = f"\n  ... and {len(errors) - 10} more" if len(errors) > 10 else ""
    raise FleetError(
        f"the imported repository does not validate, so nothing was written:\n  {shown}{more}",
        where=str(errors[0].location) if errors else str(staged),
        hint="these are findings in files an import must write as they are (fleet.yaml, the Cluster) or that "
        "the repository held before: fix the repository, or report a fleetctl import bug",
    )


def _leavable(files: dict[str, str]) -> set[str]:
    """The files the import wrote whose refusal it may leave to the user: the objects it read (a
    cluster's maintenances in ``clusters/<cluster>/`` among them), not ``fleet.yaml`` or the Cluster."""
    return {
        rel
        for rel in files
        if rel != REPORT and rel != "fleet.yaml" and not (rel.startswith("clusters/") and rel.count("/") == 1)
    }


def _lay(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


__all__ = ["REPORT", "Refused", "Written", "plan", "refused_report", "render", "report", "write"]
