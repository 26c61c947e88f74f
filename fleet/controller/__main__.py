"""``python -m fleet.controller``: the same as the ``fleet-controller`` console script."""

from fleet.controller.mains import main

if __name__ == "__main__":
    main()
