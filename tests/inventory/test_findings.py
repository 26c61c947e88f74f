"""Findings name the failing selector, clause, attribute and what devices publish instead."""

from __future__ import annotations

from fleet.inventory import Checker
from tests.inventory.conftest import GPU, claim, request


def test_never_satisfiable_names_the_excluding_clause_and_closest_values(checker: Checker) -> None:
    expression = f"{GPU}.architecture == 'Hopper' &&\n  {GPU}.productName == 'NVIDIA B200'"
    report = checker.check_claim(claim(request("gpu", expression)))
    [finding] = report.findings
    assert finding.rule == "claim-unsatisfiable"
    assert f"`{GPU}.productName == 'NVIDIA B200'`" in finding.message
    assert "'NVIDIA H100 80GB HBM3' (9)" in finding.hint and "'NVIDIA H200' (8)" in finding.hint
    assert (finding.source, finding.selector_index, finding.request_index) == ("request", 0, 0)
    assert expression[finding.offset or 0 :].startswith(f"{GPU}.productName")
    assert (finding.line, finding.column) == (2, 3)


def test_class_excluding_everything(checker: Checker) -> None:
    classes = {"vfio.gpu.nvidia.com": {"spec": {"selectors": [{"cel": {"expression": f"{GPU}.type == 'vfio'"}}]}}}
    report = Checker(inventory=checker.inventory, classes=classes).check_claim(
        claim(request("gpu", device_class="vfio.gpu.nvidia.com"))
    )
    assert report.findings[0].source == "class"
    assert "selects no device" in report.findings[0].message


def test_removed_attributes_name_the_current_one(checker: Checker) -> None:
    report = checker.check_claim(claim(request("gpu", f"{GPU}.pcieBusID == '0000:1b:00.0'")))
    [finding] = report.findings
    assert finding.rule == "cel-unknown-attribute"
    assert "gpu.nvidia.com/pcieBusID" in finding.message and "no such key: pcieBusID" in finding.message
    assert "device.attributes['resource.kubernetes.io'].pciBusID" in finding.hint
    assert (finding.line, finding.column, finding.offset) == (1, 37, 36)
    for removed in ("index", "minor"):
        [finding] = checker.check_claim(claim(request("gpu", f"{GPU}.{removed} == 0"))).findings
        assert finding.rule == "cel-unknown-attribute" and "no longer publishes" in finding.hint


def test_misspelled_attribute_gets_did_you_mean(checker: Checker) -> None:
    [finding] = checker.check_claim(claim(request("gpu", f"{GPU}.productname == 'x'"))).findings
    assert "did you mean productName" in finding.hint


def test_guarded_reads_are_not_unknown_attributes(checker: Checker) -> None:
    report = checker.check_claim(claim(request("gpu", f"!has({GPU}.index) && {GPU}.?minor.orValue(0) == 0")))
    assert report.satisfiable and not report.findings


def test_runtime_errors_on_some_nodes_are_warnings(checker: Checker) -> None:
    report = checker.check_claim(claim(request("gpu", f"{GPU}.profile == '1g.10gb' || true")))
    assert report.satisfiable  # `||` absorbs the error
    partial = checker.check_claim(claim(request("gpu", f"{GPU}.architecture == 'Ampere' || {GPU}.profile == 'x'")))
    assert partial.satisfiable
    [warning] = partial.findings
    assert (warning.rule, warning.severity) == ("cel-runtime-error", "warning")
    assert "no such key: profile" in warning.message


def test_compile_errors_and_unknown_classes(checker: Checker) -> None:
    [compile_error] = checker.check_claim(claim(request("gpu", f"{GPU}.productName.lowerAsci() == 'x'"))).findings
    assert (compile_error.rule, compile_error.line, compile_error.column) == ("cel-compile", 1, 58)
    [unknown] = checker.check_claim(claim(request("gpu", device_class="gpu.example.com"))).findings
    assert unknown.rule == "deviceclass-unknown" and "gpu.nvidia.com" in unknown.hint


def test_v1beta1_flat_requests_are_invalid(checker: Checker) -> None:
    [finding] = checker.check_claim({"devices": {"requests": [{"name": "gpu", "deviceClassName": "x"}]}}).findings
    assert finding.rule == "claim-invalid" and "exactly" in finding.hint
