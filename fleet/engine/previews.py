"""A Change as people review it: a unified diff of the live and the merged object, in YAML.

Reviewers read ``fleetctl diff`` in pull requests and terminals, the way they read
``kubectl diff``: ``---``/``+++`` name the object (``live``/``merged``, as kubectl's
directories do), and the body is the YAML of the normalised objects the Change
carries, so what is shown is exactly what was compared. Colour and layout belong to
the CLI; this module only produces the text.

The YAML is written by libyaml (PyYAML's C emitter, the library the loader already uses
to compose): ruamel.yaml's pure-Python emitter is much slower per object, which a large
change multiplies.
Keys are sorted and long strings are not folded, as in ``kubectl diff``'s YAML.

``field_diff`` is the short form for a long preview (``fleetctl diff`` without ``--full`` when
many objects change): only the fields that differ, one line each, named by the path the API
server's conflict messages use (``.spec.hard.requests.cpu``, ``.spec.taints[0]``). A Node a
pool labels is then its few labels, not its whole body. fleet's bookkeeping annotations (the
revision, the applied hash) are left out of it: the hash is of the rest of the body, so it
changes exactly when another field does and tells a reader nothing more (``unified`` keeps them).
"""

from __future__ import annotations

import difflib
import json
from typing import Any

import yaml

from fleet.engine import ownership
from fleet.engine.changesets import Action, Change


def unified(change: Change) -> str:
    """A unified diff of the change as YAML (``---``/``+++`` name the object)."""
    name = f"{change.ref.api_version}/{change.ref.kind} {change.ref.namespace + '/' if change.ref.namespace else ''}"
    name += change.ref.name
    before = yaml_text(change.before).splitlines(keepends=True)
    after = yaml_text(change.after).splitlines(keepends=True)
    if change.action == Action.DELETED and not change.release:
        after = []
    lines = difflib.unified_diff(before, after, fromfile=f"live {name}", tofile=f"merged {name}", n=3)
    return "".join(lines)


def field_diff(change: Change) -> list[str]:
    """The fields ``change`` sets, changes or removes, one line each: ``- <path>: <live value>``,
    ``+ <path>: <merged value>``, in the body's key order.

    A line holds one leaf: a scalar, an empty map or list, or a list element whose flow YAML fits
    in ``FLOW_WIDTH`` characters (a larger one is split into its fields). List elements are matched
    as ``difflib`` matches lines, so one element inserted is one ``+`` line, not a shifted list."""
    out: list[str] = []
    _walk(change.before or {}, change.after or {}, "", out)
    return out


def _walk(before: Any, after: Any, path: str, out: list[str]) -> None:
    if before == after:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for key in _keys({**before, **after}, path):
            here = f"{path}.{key}"
            if key not in before:
                _side("+", after[key], here, out)
            elif key not in after:
                _side("-", before[key], here, out)
            else:
                _walk(before[key], after[key], here, out)
        return
    if isinstance(before, list) and isinstance(after, list):
        same = difflib.SequenceMatcher(None, [_key(x) for x in before], [_key(x) for x in after], autojunk=False)
        for tag, i1, i2, j1, j2 in same.get_opcodes():
            if tag == "equal":
                continue
            if tag == "replace" and i2 - i1 == j2 - j1:  # element for element: what changed inside each
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                    _walk(before[i], after[j], f"{path}[{j}]", out)
                continue
            for i in range(i1, i2):
                _element("-", before[i], f"{path}[{i}]", out)
            for j in range(j1, j2):
                _element("+", after[j], f"{path}[{j}]", out)
        return
    _side("-", before, path, out)  # a scalar changed, or a value changed type
    _side("+", after, path, out)


def _side(sign: str, value: Any, path: str, out: list[str]) -> None:
    """``value`` at ``path`` as ``sign`` lines, one per leaf."""
    if isinstance(value, dict) and value:
        for key in _keys(value, path):
            _side(sign, value[key], f"{path}.{key}", out)
        return
    if isinstance(value, list) and value:
        for i, item in enumerate(value):
            _element(sign, item, f"{path}[{i}]", out)
        return
    out.append(f"{sign} {path}: {flow(value)}")


def _element(sign: str, item: Any, path: str, out: list[str]) -> None:
    """A list element: one line if it fits in ``FLOW_WIDTH``, else one line per leaf."""
    text = flow(item)
    if len(text) > FLOW_WIDTH and isinstance(item, dict | list) and item:
        _side(sign, item, path, out)
    else:
        out.append(f"{sign} {path}: {text}")


def _keys(obj: dict[str, Any], path: str) -> list[str]:
    """``obj``'s keys in order, without fleet's bookkeeping annotations."""
    keys = sorted(obj)
    return [k for k in keys if k not in _BOOKKEEPING] if path == ".metadata.annotations" else keys


def _key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, default=str)


def flow(value: Any) -> str:
    """``value`` as one line of flow YAML (``{key: value}``, ``'8'``); a string of several lines quoted with ``\\n``."""
    text: str = yaml.dump(value, Dumper=_Flow, default_flow_style=True, sort_keys=True, width=_UNFOLDED,
                          allow_unicode=True)  # fmt: skip
    return text.removesuffix("\n").removesuffix("\n...")


def yaml_text(obj: dict[str, Any] | None) -> str:
    """``obj`` as block YAML (empty for no object)."""
    if obj is None:
        return ""
    text: str = yaml.dump(obj, Dumper=_Dumper, default_flow_style=False, sort_keys=True, width=_UNFOLDED,
                          allow_unicode=True)  # fmt: skip
    return text


_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_UNFOLDED = 1 << 30
FLOW_WIDTH = 100
"""The longest list element ``field_diff`` shows on one line."""
_BOOKKEEPING = frozenset({ownership.REVISION, ownership.APPLIED})  # as fleet.engine.drifts leaves them out


class _Flow(_Dumper):  # type: ignore[misc]
    """The YAML dumper, with a string of several lines double-quoted (one line, ``\\n`` escaped)."""


def _string(dumper: Any, value: str) -> Any:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if "\n" in value else None)


_Flow.add_representer(str, _string)


__all__ = ["FLOW_WIDTH", "field_diff", "flow", "unified", "yaml_text"]
