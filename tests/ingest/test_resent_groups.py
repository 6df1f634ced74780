"""Senders repeat themselves: Alertmanager sends every alert of a group again with each
notification of the group, Events API senders trigger an open key again at every evaluation. A
view that changes nothing writes nothing (no new row version, no second correlation), and one
that changes something is still written."""

from __future__ import annotations

import json

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


def test_an_event_triggered_again_unchanged_writes_nothing(make_integration, store):
    """Events API senders trigger an open dedup key again at every evaluation."""
    require_postgres()
    hook = make_integration("events")

    def trigger(at: str, summary: str = "KV cache full on vllm-a") -> bytes:
        return json.dumps(
            {
                "routing_key": hook.plain_token,
                "event_action": "trigger",
                "dedup_key": "kv-a",
                "payload": {
                    "summary": summary,
                    "source": "vllm-a",
                    "severity": "critical",
                    "timestamp": at,
                    "custom_details": {"alertname": "VLLMKVCacheFull", "pod": "vllm-a"},
                },
            }
        ).encode()

    store(hook, trigger("2026-11-29T01:00:00Z"))
    first = row_versions()["vllm-a"]
    store(hook, trigger("2026-11-29T01:01:00Z"))
    assert row_versions()["vllm-a"] == first
    store(hook, trigger("2026-11-29T01:02:00Z", "KV cache still full on vllm-a"))
    assert row_versions()["vllm-a"][0] != first[0]
    assert Alert.objects.get().annotations["summary"] == "KV cache still full on vllm-a"
