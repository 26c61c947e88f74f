"""Where a revision comes from: git checkouts (adapter layer, beside ``fleet.kube``).

- ``checkouts``  the revision id of a local checkout: its commit, and a content hash
                 when the work tree differs from that commit
"""

from __future__ import annotations

from fleet.source.checkouts import revision_id

__all__ = ["revision_id"]
