"""Entry point: ``fleetctl`` and ``python -m fleetctl``."""

from __future__ import annotations

import os
import sys

from fleetctl import cli


def main() -> None:
    try:
        code = cli.run(sys.argv[1:])
        sys.stdout.flush()
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly, as kubectl does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    main()
