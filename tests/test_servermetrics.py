"""``tests.servermetrics``: the API server's Prometheus text read as counts (pure functions)."""

from __future__ import annotations

from tests import servermetrics

TEXT = """\
# HELP apiserver_flowcontrol_rejected_requests_total [BETA] Number of requests rejected by API Priority and Fairness
# TYPE apiserver_flowcontrol_rejected_requests_total counter
apiserver_flowcontrol_rejected_requests_total{flow_schema="fleet",priority_level="fleet",reason="concurrency-limit"} 31
apiserver_flowcontrol_rejected_requests_total{flow_schema="fleet",priority_level="fleet",reason="time-out"} 2
apiserver_flowcontrol_rejected_requests_total{flow_schema="other",priority_level="workload-low",reason="queue-full"} 7
apiserver_request_total{code="200",dry_run="",group="",resource="configmaps",subresource="",verb="LIST"} 4
apiserver_request_total{code="429",dry_run="",group="",resource="configmaps",subresource="",verb="LIST"} 3
"""


def test_rejected_requests_sums_every_reason_of_one_priority_level() -> None:
    assert servermetrics.rejected_requests(TEXT, priority_level="fleet") == 33
    assert servermetrics.rejected_requests(TEXT, priority_level="workload-low") == 7
    assert servermetrics.rejected_requests(TEXT, priority_level="absent") == 0


def test_request_totals_sum_codes() -> None:
    assert servermetrics.request_totals(TEXT)[("LIST", "configmaps", "", "")] == 7
