"""Schemathesis against the API's own OpenAPI document: every operation, with generated
parameters and bodies, answers without a 500 and with what the schema says it answers.

The schema is read from the running app (`/api/v1/schema/`, signed in, as a client reads it) over
WSGI, inside the test's database, with a signed-in admin (every operation allowed) and a small
fleet of stored incidents, so reads find rows and writes have something to act on. Under CI the
examples are derandomized, so a run is repeatable.
"""

from __future__ import annotations

import json
import os

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from incidents.services.api_tokens import api_token_issue
from incidents.services.integrations import roles_ensure

pytestmark = pytest.mark.django_db


FLEET = [
    {"alertname": "DCGMXidError", "cluster": "c1", "node": "n1", "gpu": "0", "severity": "critical"},
    {"alertname": "KubePodCrashLooping", "cluster": "c1", "namespace": "llm", "pod": "vllm-0", "node": "n1"},
    {"alertname": "LLMTTFTp99High", "cluster": "c1", "namespace": "llm", "model_name": "llama-3-8b"},
]


@pytest.fixture
def api_headers(db, django_user_model, make_integration, deliver) -> dict[str, str]:
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user("fuzz-admin", password="not used")
    roles_ensure()
    user.groups.add(Group.objects.get(name="admin"))
    alerts = [
        {"status": "firing", "labels": labels, "annotations": {"summary": labels["alertname"]},
         "startsAt": f"2026-11-29T02:0{index}:00Z"}
        for index, labels in enumerate(FLEET)
    ]  # fmt: skip
    assert deliver(make_integration(), json.dumps({"alerts": alerts})).status_code == 202
    return {"Authorization": f"Token {api_token_issue(username='fuzz-admin')}"}


@pytest.fixture
def api_schema(api_headers):
    # As Django's test client does: a request's end must not close the test's database connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi(
            "/api/v1/schema/?format=json", WSGIHandler(), headers=api_headers
        )
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]
EXAMPLES = int(os.environ.get("ROOTLINE_API_FUZZ_EXAMPLES", "40"))


def test_every_operation_answers_without_a_500_and_as_its_schema_says(api_schema, api_headers):
    # Each operation's generated cases in turn (schemathesis's own pytest plugin does not load
    # under this pytest); every operation is tried, and the failures are told together.
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) > 20, "the schema lost its operations"
    failures = [failure for operation in operations if (failure := fuzz(operation, api_headers))]
    assert not failures, "\n\n".join(failures)


def fuzz(operation, headers: dict[str, str]) -> str | None:
    """The first failure hypothesis finds in the operation's generated cases, as text."""

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=bool(os.environ.get("CI")),
        suppress_health_check=list(HealthCheck),
        database=None,
        print_blob=False,
    )
    @given(case=operation.as_strategy())
    def answers_as_documented(case):
        case.call_and_validate(headers=headers, checks=CHECKS)

    try:
        answers_as_documented()
    except (Exception, BaseExceptionGroup) as failure:  # noqa: BLE001 - every operation's failure is told
        return f"{operation.label}: {str(failure)[:1500]}"
    return None
