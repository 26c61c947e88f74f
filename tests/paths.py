"""Where the test inputs live.

The driver-exact ResourceSlice fixtures and the NVML reading are copied into the project
(``tests/fixtures``): nothing reads ``shared/`` for them at test time. The DRA guide's seed
manifests still come from ``shared/`` beside the checkout (``FLEET_SHARED_DIR`` overrides it);
CI clones the project with a copy of ``shared/`` beside it, so that path is derived from this
file, never written out.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FLEET_SHARED_DIR") or ROOT.parent / "shared")
FIXTURES = ROOT / "tests" / "fixtures"
SEED = SHARED / "seed" / "manifests"
