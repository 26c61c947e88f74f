"""Entry point: ``fleetctl`` and ``python -m fleetctl``.

The command modules are imported inside the guarded block: Ctrl-C while Python is
still importing them (a second or so) must end as quietly as Ctrl-C later on.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    try:
        from fleet.errors import count_interrupts

        count_interrupts()
        from fleetctl import cli

        code = cli.run(sys.argv[1:])
        sys.stdout.flush()
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly, as kubectl does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except KeyboardInterrupt:
        print("fleetctl: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
