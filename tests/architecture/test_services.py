"""The services' shape: each incident action is its own keyword-only service, and a refusal is
one error type whose code the interfaces map to their answer."""

from __future__ import annotations

import inspect

import pytest

from incidents.action_bodies import ACTION_FIELDS, SERVICES
from incidents.services import errors


@pytest.mark.parametrize("action", sorted(SERVICES))
def test_each_incident_action_is_a_keyword_only_service_taking_its_fields(action):
    parameters = inspect.signature(SERVICES[action]).parameters
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    assert set(parameters) == {"incident", "user", "via", "at", "idempotency_key", *ACTION_FIELDS[action]}
    assert SERVICES[action].__name__.startswith("incident_")


def test_every_error_code_has_an_http_answer_and_unknown_codes_are_refused():
    assert set(errors.HTTP_STATUS) == set(errors.CODES)
    assert [
        errors.invalid("x").http_status,
        errors.forbidden("x").http_status,
        errors.not_found("x").http_status,
        errors.conflict("x").http_status,
    ] == [400, 403, 404, 409]
    with pytest.raises(ValueError):
        errors.RootlineError("x", code="teapot")
