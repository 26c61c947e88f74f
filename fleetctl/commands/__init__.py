"""One module per ``fleetctl`` sub-command; each defines ``register(subparsers)``."""
