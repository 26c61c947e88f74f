"""Server answers become typed errors that name the state, the managers and the fields."""

from __future__ import annotations

from fleet import kube
from fleet.kube import errors


def test_ssa_conflict_names_every_other_manager_once() -> None:
    message = (
        'Apply failed with 3 conflicts: conflicts with "kubectl-client-side-apply" using v1:\n'
        '- .metadata.labels.team\nconflict with "ops-script" using v1: .spec.x\n'
        'conflicts with "kubectl-client-side-apply" using v1: .spec.y'
    )
    err = errors.from_status(status=409, body={"reason": "Conflict", "message": message}, where="Node n1")
    assert isinstance(err, kube.Conflict)
    assert err.managers == ("kubectl-client-side-apply", "ops-script")
    assert "--force-conflicts" in err.hint and "ops-script" in err.hint


def test_invalid_keeps_field_causes() -> None:
    body = {
        "reason": "Invalid",
        "message": 'DeviceClass.resource.k8s.io "x" is invalid',
        "details": {"causes": [{"field": "spec.selectors[0].cel.expression", "message": "undeclared"}]},
    }
    err = errors.from_status(status=422, body=body, where="DeviceClass x")
    assert isinstance(err, kube.Invalid)
    assert err.causes == (kube.Cause(field="spec.selectors[0].cel.expression", message="undeclared"),)


def test_status_codes_map_to_states() -> None:
    cases = {
        404: kube.NotFound,
        403: kube.Forbidden,
        401: kube.Forbidden,
        400: kube.Invalid,
        429: kube.TooManyRequests,
        500: kube.ServerError,
        503: kube.ServerError,
    }
    for status, expected in cases.items():
        err = errors.from_status(status=status, body="text body", where="here")
        assert type(err) is expected, status
        assert err.status == status
        assert str(err).startswith("here: text body")


def test_every_kube_error_is_a_fleet_error() -> None:
    from fleet.errors import FleetError

    for cls in (
        kube.NotFound,
        kube.Conflict,
        kube.Forbidden,
        kube.Invalid,
        kube.TooManyRequests,
        kube.ServerError,
        kube.Unreachable,
    ):
        assert issubclass(cls, kube.KubeError) and issubclass(cls, FleetError)


def test_ssa_schema_failure_is_invalid_not_a_server_error() -> None:
    message = (
        "failed to create typed patch object (ns/x; resource.k8s.io/v1, Kind=ResourceClaimTemplate): "
        ".spec.foo: field not declared in schema"
    )
    err = errors.from_status(status=500, body={"message": message, "code": 500}, where="x")
    assert isinstance(err, kube.Invalid)
