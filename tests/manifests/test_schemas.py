"""schemas/ is generated from the models and the example files point at the right one."""

from __future__ import annotations

import json
import re

from pydantic import Field

from fleet.manifests import jsonschemas, load_revision
from fleet.manifests.bases import Model
from tests.manifests.repos import EXAMPLE, ROOT

MODELINE = re.compile(r"^# yaml-language-server: \$schema=(\S+)$")


def test_checked_in_schemas_are_current() -> None:
    wanted = jsonschemas.generate()
    on_disk = {p.name: p.read_text() for p in (ROOT / "schemas").glob("*.schema.json")}
    stale = sorted(n for n in wanted.keys() | on_disk.keys() if wanted.get(n) != on_disk.get(n))
    assert stale == [], "schemas are stale: run python tools/gen_schemas.py"


def test_schemas_declare_their_dialect_and_forbid_unknown_fields() -> None:
    team = json.loads(jsonschemas.generate()["team.schema.json"])
    assert team["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert team["additionalProperties"] is False
    assert team["properties"]["kind"] == {"const": "Team", "title": "kind", "type": "string"}


def test_every_example_file_has_a_modeline_to_its_kinds_schema() -> None:
    files = sorted(EXAMPLE.rglob("*.yaml"))
    assert len(files) == 22
    for path in files:
        match = MODELINE.match(path.read_text().splitlines()[0])
        assert match, f"{path} has no yaml-language-server modeline"
        schema_path = (path.parent / match.group(1)).resolve()
        assert schema_path.is_file(), f"{path}: {schema_path} does not exist"
        [manifest] = load_revision({path.name: path.read_bytes()}).manifests
        schema = json.loads(schema_path.read_text())
        assert schema["properties"]["kind"]["const"] == manifest.kind, path


class _Base(Model):
    size: int = 0
    """How big."""
    colour: str = ""
    """Inherited as written here."""


class _Child(_Base):
    size: int = 1
    """How big, in the child."""
    shape: str = Field("", description="given explicitly")
    """Not this one."""
    plain: str = ""
    later: str = ""

    def method(self) -> str:
        """Not a field's."""
        return ""


def test_field_descriptions_are_the_docstrings_under_the_fields_nearest_declaration() -> None:
    props = _Child.model_json_schema(by_alias=True, schema_generator=jsonschemas._WithDialect)["properties"]
    assert props["size"]["description"] == "How big, in the child."
    assert props["colour"]["description"] == "Inherited as written here."
    assert props["shape"]["description"] == "given explicitly"
    assert "description" not in props["plain"] and "description" not in props["later"]
    assert _Child.model_fields["size"].description is None, "the models themselves do not read docstrings"
