"""What people are shown: the figures ``fleetctl`` prints and the console draws, each computed once.

``fleetctl status``, ``inventory`` and the console's pages read the same functions here, so
a number on a page is the number the CLI prints. Each module is named for what it figures:

- ``fleetsyncs``: one row per cluster from its ``FleetSync`` (state, revisions, wave, holds).
- ``devices``: who holds which GPU, and what is left per model, node and pool.
- ``slices``: a cluster's ResourceSlices with the DeviceTaintRules' taints, as the scheduler sees them.
- ``teams``: quota used and limit per DeviceClass, templates and pending pods of a team.
- ``maintenances``: each GPUMaintenance's phase, devices, pods waited on and what it waits for.
- ``revisions``: what a checkout changes on a cluster, as ``fleetctl diff -o markdown`` and the
  console's Revision page say it; ``comments`` lays out that pull-request comment (and
  ``fleetctl validate``'s), ``entries`` says which changes it and the terminal show.
"""
