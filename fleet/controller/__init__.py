"""The in-cluster controller: one process per cluster that keeps the cluster at git's newest valid revision.

It only wires existing pieces together (``docs/controller.md``,
``docs/architecture.md``): the git source (``fleet.source``), the engine's pipeline
(``fleet.engine.pipelines.check_and_plan`` and the step-wise ``Sync``), the writer Lease
(``fleet.engine.writers``), around a loop of its own. Modules:

- ``settings``     flags and ``FLEET_*`` variables, checked at start (one line per invalid one)
- ``startups``     what settings cannot check: a writable state directory, the pod's token and CA
- ``queues``       de-duplicating, rate-limited work queue with per-key backoff
- ``caches``       list→watch per kind: the engine's live state and health-gate reader
- ``controllers``  the task group: builds one object per concern and runs their tasks
- ``options``      the controller's options, built once
- ``intakes``      the git source (polls, webhook pokes) and which watch events wake a reconcile
- ``reconciles``   the reconcile loop: plan the newest checkout, drive the engine, retry with backoff
- ``holds``        disruptive changes held for the rollout waves and the window; emergencies
- ``reports``      what a reconcile tells: status, Events, the revision's commit status
- ``journeys``     a revision's trace, from the fetch that found it until it is applied or refused
- ``statuses``     the FleetSync status (kstatus conditions) and its writer; ``sections`` its lists;
  ``events`` the Events, as views of ChangeSets
- ``rollouts``     the commit status context, and the earlier rollout waves' statuses read
- ``leaders``      leader election on the cluster's writer Lease; losing it stops writing
- ``servers``, ``webhooks``, ``metrics``   /webhook, /healthz, /readyz, /metrics
- ``mains``        the ``fleet-controller`` entry point
"""
