"""The in-cluster controller: one process per cluster that keeps the cluster at git's newest valid revision.

It only wires existing pieces together (``docs/controller.md``,
``docs/architecture.md``): the git source (``fleet.source``), the engine's pipeline
(``fleet.engine.pipelines.check_and_plan`` and the step-wise ``Sync``), the writer Lease
(``fleet.engine.writers``), around a loop of its own. Modules:

- ``settings``     flags and ``FLEET_*`` variables, checked at start (one line per invalid one)
- ``startups``     what settings cannot check: a writable state directory, the pod's token and CA
- ``queues``       de-duplicating, rate-limited work queue with per-key backoff
- ``caches``       list→watch per kind: the engine's live state and health-gate reader
- ``controllers``  the task group: poll/webhook → queue → reconcile; drift from watch events
- ``statuses``     the FleetSync status (kstatus conditions) and Events, as views of ChangeSets
- ``leaders``      leader election on the cluster's writer Lease; losing it stops writing
- ``servers``, ``webhooks``, ``metrics``   /webhook, /healthz, /readyz, /metrics
- ``mains``        the ``fleet-controller`` entry point
"""
