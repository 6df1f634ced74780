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
from hypothesis import HealthCheck, settings
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
    return schemathesis.openapi.from_wsgi(
        "/api/v1/schema/?format=openapi-json", WSGIHandler(), headers=api_headers
    )


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("ROOTLINE_API_FUZZ_EXAMPLES", "20")),
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_without_a_500_and_as_its_schema_says(case, api_headers):
    case.call_and_validate(
        headers=api_headers,
        checks=[not_a_server_error, response_schema_conformance, content_type_conformance],
    )
