"""Alertmanager sends every alert of a group again with each notification of the group: a view
that changes nothing writes nothing (no new row version, no second correlation), and one that
changes something is still written."""
from __future__ import annotations

import pytest
from django.db import connection

from incidents.models import Alert
from incidents.tasks import process_delivery
from tests.conftest import require_postgres
from tests.test_webhook import am_alert, am_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def store(post_hook, django_capture_on_commit_callbacks):
    """Receive and store a body, without correlating it (what ingestion alone writes)."""

    def store(integration, body: bytes) -> None:
        with django_capture_on_commit_callbacks(execute=False):
            response = post_hook(integration, body)
            assert response.status_code == 202, response.content
            process_delivery(response.json()["delivery"])

    return store


def row_versions() -> dict[str, tuple[str, bool]]:
    """Each stored alert's row version (PostgreSQL's `xmin`, new whenever the row is written) and flag."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT labels->>'pod', xmin::text, correlated FROM incidents_alert")
        return {pod: (version, correlated) for pod, version, correlated in cursor.fetchall()}


def test_a_group_sent_again_rewrites_only_what_changed(make_integration, deliver, store):
    require_postgres()
    hook = make_integration()
    oom = am_alert("LLMContainerOOMKilled", pod="vllm-a")
    queueing = am_alert("LLMQueueWaitHigh", pod="vllm-b")
    resolved = dict(oom, status="resolved", endsAt="2026-11-29T02:10:00Z")
    deliver(hook, am_body(oom, queueing))
    deliver(hook, am_body(resolved, queueing))
    before = row_versions()
    assert before["vllm-a"][1] and before["vllm-b"][1]  # both correlated

    # The group again, with a new alert: the resolved view and the firing one are unchanged.
    store(hook, am_body(resolved, queueing, am_alert("TargetDown", pod="vllm-c")))
    after = row_versions()
    assert after["vllm-a"] == before["vllm-a"]  # not written, still correlated: no second correlation
    assert after["vllm-b"] == before["vllm-b"]
    assert after["vllm-c"][1] is False  # the new one waits for correlation

    # A label changed: written (the engine's kept state sees the new labels on its next run).
    relabelled = dict(queueing, labels={**queueing["labels"], "severity": "critical"})
    store(hook, am_body(resolved, relabelled))
    assert row_versions()["vllm-b"][0] != before["vllm-b"][0]
    assert Alert.objects.get(labels__pod="vllm-b").labels["severity"] == "critical"
    assert Alert.objects.get(labels__pod="vllm-a").status == "resolved"
