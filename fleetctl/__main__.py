"""Entry point: ``fleetctl`` and ``python -m fleetctl``."""

from __future__ import annotations

import sys

from fleetctl import cli


def main() -> None:
    sys.exit(cli.run(sys.argv[1:]))


if __name__ == "__main__":
    main()
