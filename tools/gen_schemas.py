"""Write schemas/*.schema.json from the pydantic models: ``python tools/gen_schemas.py``.

Run it after changing a model; tests/manifests/test_schemas.py fails until
the checked-in schemas match. ``--check`` exits 1 instead of writing when
they are stale (for CI or pre-commit).
"""

from __future__ import annotations

import sys
from pathlib import Path

from fleet.manifests import jsonschemas

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


def main(argv: list[str]) -> int:
    wanted = jsonschemas.generate()
    stale = sorted(n for n, text in wanted.items() if not (SCHEMAS / n).is_file() or (SCHEMAS / n).read_text() != text)
    extra = sorted(p.name for p in SCHEMAS.glob("*.schema.json") if p.name not in wanted)
    if "--check" in argv:
        for name in [*stale, *extra]:
            print(f"schemas/{name} is stale; run python tools/gen_schemas.py", file=sys.stderr)
        return 1 if stale or extra else 0
    SCHEMAS.mkdir(exist_ok=True)
    for name in stale:
        (SCHEMAS / name).write_text(wanted[name])
        print(f"wrote schemas/{name}")
    for name in extra:
        (SCHEMAS / name).unlink()
        print(f"removed schemas/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
