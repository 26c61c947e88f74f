"""Where the shared inputs every developer and CI have live: ``shared/`` beside the checkout.

CI clones the project into a folder of its own with a copy of ``shared/`` beside it, so the
path is derived from this file, never written out; ``FLEET_SHARED_DIR`` overrides it.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FLEET_SHARED_DIR") or ROOT.parent / "shared")
FIXTURES = SHARED / "fixtures"
SEED = SHARED / "seed" / "manifests"
