"""fleetctl: the command line of fleet (validate, render, diff, apply, sandbox, ...)."""
