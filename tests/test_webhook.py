"""The webhook's behaviour through the real URL: storage, idempotency, occurrences, limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from incidents import services
from incidents.models import Alert, Delivery
from incidents.tasks import process_delivery

SAMPLES = Path(__file__).resolve().parent / "fixtures" / "alertmanager"


def am_body(*alerts: dict, status: str = "firing") -> bytes:
    return json.dumps(
        {
            "version": "4",
            "groupKey": '{}:{alertname="X"}',
            "truncatedAlerts": 0,
            "status": status,
            "receiver": "rootline",
            "groupLabels": {},
            "commonLabels": {},
            "commonAnnotations": {},
            "externalURL": "http://127.0.0.1:9093",
            "alerts": list(alerts),
        }
    ).encode()


def am_alert(
    name: str = "LLMContainerOOMKilled",
    *,
    pod: str = "vllm-llama-7d9f8-abcde",
    starts: str = "2026-11-29T02:00:00.123Z",
    status: str = "firing",
    ends: str = "0001-01-01T00:00:00Z",
    **labels: str,
) -> dict:
    return {
        "status": status,
        "labels": {"alertname": name, "pod": pod, "cluster": "c1", **labels},
        "annotations": {"summary": f"{name} on {pod}"},
        "startsAt": starts,
        "endsAt": ends,
        "generatorURL": "http://prom/graph?g0.expr=x",
        "fingerprint": f"fp-{name}-{pod}",
    }


@pytest.mark.django_db
def test_alert_ingest_stores_body_before_answering_and_processes_by_task(
    make_integration, post_hook, django_capture_on_commit_callbacks
):
    integration = make_integration()
    body = am_body(am_alert())
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post_hook(integration, body)
    assert response.status_code == 202
    assert response.json()["accepted"] == 1
    delivery = Delivery.objects.get(pk=response.json()["delivery"])
    assert bytes(delivery.body) == body and delivery.status == "pending"
    assert len(callbacks) == 1 and Alert.objects.count() == 0  # the enqueue waits for the commit
    process_delivery(delivery.pk)  # as the worker runs it
    delivery.refresh_from_db()
    assert delivery.status == "processed"
    alert = Alert.objects.get()
    assert alert.fingerprint == "fp-LLMContainerOOMKilled-vllm-llama-7d9f8-abcde"
    assert alert.starts_at.isoformat() == "2026-11-29T02:00:00.123000+00:00"
    assert alert.ends_at is None and alert.status == "firing"


@pytest.mark.django_db
def test_alert_ingest_duplicate_delivery_is_noop(
    make_integration, post_hook, deliver, django_capture_on_commit_callbacks
):
    integration = make_integration()
    body = am_body(am_alert(), am_alert("VLLMQueueHigh"))
    first = deliver(integration, body)
    before = list(Alert.objects.order_by("id").values())
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        second = post_hook(integration, body)
    assert second.status_code == 202 and second.json() == first.json()
    assert callbacks == []
    assert Delivery.objects.count() == 1
    assert list(Alert.objects.order_by("id").values()) == before


@pytest.mark.django_db
def test_alert_ingest_group_resend_with_new_member_adds_only_the_new_alert(make_integration, deliver):
    integration = make_integration()
    deliver(integration, am_body(am_alert()))
    first = Alert.objects.get()
    deliver(integration, am_body(am_alert(), am_alert("VLLMQueueHigh")))
    assert Alert.objects.count() == 2
    assert Alert.objects.get(pk=first.pk).starts_at == first.starts_at


@pytest.mark.django_db
def test_resolved_notification_closes_the_occurrence_and_late_firing_does_not_reopen_it(
    make_integration, deliver
):
    integration = make_integration()
    deliver(integration, am_body(am_alert()))
    resolved = am_alert(status="resolved", ends="2026-11-29T02:05:00Z")
    deliver(integration, am_body(resolved, status="resolved"))
    alert = Alert.objects.get()
    assert alert.status == "resolved" and alert.ends_at.isoformat() == "2026-11-29T02:05:00+00:00"
    late = am_alert()
    late["annotations"] = {"summary": "late re-send"}
    deliver(integration, am_body(late))
    alert.refresh_from_db()
    assert alert.status == "resolved"


@pytest.mark.django_db
def test_a_later_firing_of_the_same_fingerprint_is_a_new_occurrence(make_integration, deliver):
    integration = make_integration()
    deliver(integration, am_body(am_alert(status="resolved", ends="2026-11-29T02:05:00Z")))
    deliver(integration, am_body(am_alert(starts="2026-11-29T03:10:00Z")))
    occurrences = list(Alert.objects.order_by("starts_at").values_list("status", flat=True))
    assert occurrences == ["resolved", "firing"]


@pytest.mark.django_db
def test_firing_alert_endsat_is_not_taken_as_its_end(make_integration, deliver):
    integration = make_integration()
    deliver(integration, am_body(am_alert(ends="2026-11-29T02:04:00Z")))
    assert Alert.objects.get().ends_at is None


@pytest.mark.django_db
def test_wrong_or_missing_token_is_401_and_stores_nothing(make_integration, post_hook):
    integration = make_integration()
    assert post_hook(integration, am_body(am_alert()), token="nope").status_code == 401
    assert post_hook(integration, am_body(am_alert()), token="").status_code == 401
    other = make_integration("grafana")
    assert post_hook(other, am_body(am_alert()), token=integration.plain_token).status_code == 401
    assert Delivery.objects.count() == 0


@pytest.mark.django_db
def test_token_is_stored_as_sha256_digest_not_plain(make_integration):
    import hashlib

    integration = make_integration(token="s3cret-token")
    assert integration.token_digest == hashlib.sha256(b"s3cret-token").hexdigest()
    assert "s3cret-token" not in integration.token_digest


@pytest.mark.django_db
def test_authorization_header_is_never_stored(make_integration, post_hook):
    integration = make_integration()
    response = post_hook(integration, am_body(am_alert()))
    headers = Delivery.objects.get(pk=response.json()["delivery"]).headers
    assert headers["authorization"] == "[redacted]"
    assert integration.plain_token not in json.dumps(headers)


@pytest.mark.django_db
def test_body_over_limit_is_413_and_keeps_size_and_headers_only(make_integration, post_hook, settings):
    settings.MAX_BODY = 1000
    integration = make_integration()
    body = am_body(*[am_alert(pod=f"pod-{n}") for n in range(20)])
    response = post_hook(integration, body, HTTP_USER_AGENT="Alertmanager/0.25.0")
    assert response.status_code == 413
    delivery = Delivery.objects.get(pk=response.json()["delivery"])
    assert delivery.status == "too_large" and delivery.size == len(body)
    assert delivery.headers["user-agent"] == "Alertmanager/0.25.0" and bytes(delivery.body) == b""


@pytest.mark.django_db
@pytest.mark.parametrize("kind,expected", [("alertmanager", 503), ("grafana", 503), ("events", 429)])
def test_over_rate_limit_answers_with_retry_after(make_integration, post_hook, kind, expected):
    from django.core.cache import cache

    cache.clear()
    integration = make_integration(kind, rate_limit=2)
    if kind == "events":
        bodies = [
            json.dumps(
                {
                    "routing_key": "x",
                    "event_action": "trigger",
                    "dedup_key": f"k{n}",
                    "payload": {"summary": f"s{n}", "source": "h", "severity": "error"},
                }
            )
            for n in range(5)
        ]
    else:
        bodies = [am_body(am_alert(pod=f"pod-{n}")) for n in range(5)]
    statuses = [post_hook(integration, body) for body in bodies]
    codes = [response.status_code for response in statuses]
    assert codes[:2] == [202, 202] and expected in codes[2:]
    refused = next(response for response in statuses if response.status_code == expected)
    assert refused["Retry-After"] == "1"
    assert Delivery.objects.filter(status="throttled").exists()


@pytest.mark.django_db
def test_a_rate_limit_with_no_cache_to_count_in_admits_and_stores(make_integration, post_hook, monkeypatch):
    """Redis down (tests/drills/test_redis_outage.py): the limit cannot count, and a lost page
    is worse than an alert over the limit, so the body is stored and answered 202."""
    from django.core.cache import cache

    def down(*args, **kwargs):
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(cache, "add", down)
    monkeypatch.setattr(cache, "incr", down)
    integration = make_integration(rate_limit=1)
    codes = [post_hook(integration, am_body(am_alert(pod=f"pod-{n}"))).status_code for n in range(3)]
    assert codes == [202, 202, 202]
    assert Delivery.objects.filter(integration=integration, status="pending").count() == 3


@pytest.mark.django_db
def test_storage_unavailable_is_503_with_retry_after(make_integration, post_hook):
    from django.db import OperationalError, connection

    integration = make_integration()

    def database_down(execute, sql, params, many, context):
        if "incidents_delivery" in sql and sql.lstrip().upper().startswith("INSERT"):
            raise OperationalError("could not write: the database is down")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(database_down):
        response = post_hook(integration, am_body(am_alert()))
    assert response.status_code == 503 and response["Retry-After"]
    assert "storage unavailable" in response.json()["error"]


@pytest.mark.django_db
def test_events_trigger_updates_open_occurrence_and_retrigger_after_resolve_opens_new(
    make_integration, deliver
):
    integration = make_integration("events")

    def event(action: str, at: str, summary: str = "KV cache full on vllm-a") -> bytes:
        return json.dumps(
            {
                "routing_key": integration.plain_token,
                "event_action": action,
                "dedup_key": "kv-a",
                "payload": {
                    "summary": summary,
                    "source": "vllm-a",
                    "severity": "critical",
                    "timestamp": at,
                    "custom_details": {"alertname": "VLLMKVCacheFull", "pod": "vllm-a-1", "ratio": 0.97},
                },
            }
        ).encode()

    for body in (
        event("trigger", "2026-11-29T01:00:00Z"),
        event("trigger", "2026-11-29T01:01:00Z", "still full"),
    ):
        assert deliver(integration, body).status_code == 202
    alert = Alert.objects.get()
    assert alert.alertname == "VLLMKVCacheFull" and alert.labels["ratio"] == "0.97"
    assert alert.annotations["summary"] == "still full" and alert.starts_at.minute == 0
    deliver(integration, event("resolve", "2026-11-29T01:05:00Z"))
    deliver(integration, event("trigger", "2026-11-29T02:00:00Z"))
    assert list(Alert.objects.order_by("starts_at").values_list("status", flat=True)) == [
        "resolved",
        "firing",
    ]


@pytest.mark.django_db
def test_events_routing_key_in_body_authenticates(make_integration, post_hook):
    integration = make_integration("events")
    body = json.dumps(
        {
            "routing_key": integration.plain_token,
            "event_action": "trigger",
            "payload": {"summary": "s", "source": "h", "severity": "info"},
        }
    )
    assert post_hook(integration, body, token="").status_code == 202
    wrong = json.dumps(
        {
            "routing_key": "wrong",
            "event_action": "trigger",
            "payload": {"summary": "s", "source": "h", "severity": "info"},
        }
    )
    assert post_hook(integration, wrong, token="").status_code == 401


@pytest.mark.django_db
def test_change_event_is_a_resolved_process_occurrence(make_integration, deliver):
    from correlate.events import event_fingerprint

    integration = make_integration("events")
    body = json.dumps(
        {
            "routing_key": integration.plain_token,
            "payload": {
                "summary": "Deploy vllm-llama v0.12.1",
                "timestamp": "2026-11-29T01:10:00Z",
                "source": "argo",
                "custom_details": {
                    "cluster": "c1",
                    "namespace": "llm",
                    "deployment": "vllm-llama",
                    "change_type": "deploy",
                },
            },
        }
    )
    deliver(integration, body)
    change = Alert.objects.get()
    assert (change.kind, change.layer, change.failure_mode, change.status) == (
        "change",
        "process",
        "change",
        "resolved",
    )
    assert change.fingerprint == event_fingerprint(source="argo", summary="Deploy vllm-llama v0.12.1")
    assert change.starts_at == change.ends_at and change.labels["deployment"] == "vllm-llama"


@pytest.mark.django_db
def test_rejected_delivery_can_be_replayed_after_a_fix(make_integration, post_hook):

    integration = make_integration()
    response = post_hook(
        integration, b'{"alerts": [{"labels": {"alertname": "A"}, "startsAt": "yesterday"}]}'
    )
    assert response.status_code == 400
    delivery = Delivery.objects.get(pk=response.json()["delivery"])
    assert delivery.status == "rejected" and "alerts[0].startsAt" in delivery.error
    replayed = services.delivery_replay(delivery_id=delivery.pk)
    assert replayed.status == "rejected"  # still unreadable: replay is honest, not forced


@pytest.mark.django_db
def test_alerts_page_query_count_does_not_grow_with_alerts(
    make_integration, deliver, client, django_assert_max_num_queries
):
    from django.contrib.auth.models import User

    integration = make_integration()
    for batch in range(3):
        deliver(integration, am_body(*[am_alert(pod=f"pod-{batch}-{n}") for n in range(10)]))
    client.force_login(User.objects.create_user("viewer"))
    client.get("/accounts/profile/")  # a session's first page also reads the person's time zone
    with django_assert_max_num_queries(8):
        response = client.get("/alerts/")
    assert response.status_code == 200 and response.content.count(b"pill firing") == 30


@pytest.mark.django_db
def test_zero_starts_at_alert_resent_in_a_changed_group_stays_one_occurrence(make_integration, deliver):
    integration = make_integration("grafana")
    zero = am_alert("GrafanaKVHigh", starts="0001-01-01T00:00:00Z")
    deliver(integration, am_body(zero))
    deliver(integration, am_body(zero, am_alert("Other")))
    assert Alert.objects.filter(alertname="GrafanaKVHigh").count() == 1
    deliver(
        integration, am_body(dict(zero, status="resolved", endsAt="2026-11-29T03:00:00Z"), status="resolved")
    )
    alert = Alert.objects.get(alertname="GrafanaKVHigh")
    assert (
        alert.status == "resolved" and alert.ends_at >= alert.starts_at
    )  # timed by arrival, so it cannot end before


@pytest.mark.django_db
def test_events_trigger_with_other_labels_marks_the_occurrence_for_correlation(make_integration):
    from incidents import services
    from incidents.tasks import process_delivery

    integration = make_integration("events")

    def trigger(ratio: float) -> None:
        body = json.dumps(
            {
                "routing_key": integration.plain_token,
                "event_action": "trigger",
                "dedup_key": "kv-b",
                "payload": {
                    "summary": "KV cache full",
                    "source": "vllm-b",
                    "severity": "critical",
                    "timestamp": "2026-11-29T01:00:00Z",
                    "custom_details": {"alertname": "VLLMKVCacheFull", "pod": "vllm-b-1", "ratio": ratio},
                },
            }
        )
        receipt = services.delivery_receive(integration=integration, body=body.encode(), headers={})
        process_delivery(receipt.body["delivery"])

    trigger(0.97)
    Alert.objects.update(correlated=True)
    trigger(0.97)  # the same labels again: nothing for correlation to redo
    assert Alert.objects.get().correlated is True
    trigger(0.99)
    alert = Alert.objects.get()
    assert alert.labels["ratio"] == "0.99" and alert.correlated is False
