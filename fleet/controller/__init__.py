"""The in-cluster controller: one process per cluster that keeps the cluster at git's newest revision.

It only wires existing pieces together (see docs/architecture.md):
the git source (``fleet.source``), the HTTP server with the webhook receiver and
probes (``servers``, ``webhooks``), the metrics (``metrics``), and the loop, queue,
watches, lease and status built around the engine's pipeline.
"""
