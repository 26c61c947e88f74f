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
"""

from __future__ import annotations

import difflib
from typing import Any

import yaml

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


def yaml_text(obj: dict[str, Any] | None) -> str:
    """``obj`` as block YAML (empty for no object)."""
    if obj is None:
        return ""
    text: str = yaml.dump(obj, Dumper=_Dumper, default_flow_style=False, sort_keys=True, width=_UNFOLDED,
                          allow_unicode=True)  # fmt: skip
    return text


_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_UNFOLDED = 1 << 30


__all__ = ["unified", "yaml_text"]
