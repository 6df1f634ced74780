"""A delivery whose body retention emptied: its row tells so wherever a body is shown or replayed,
a replay is a clear refusal (never a 500, never a rejected delivery), and the same body sent
again still answers as the first time did (the digest stays)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from incidents import services
from incidents.models import Delivery
from incidents.services.retention import retention_prune
from tests.test_webhook import am_alert, am_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def pruned(make_integration, deliver):
    integration = make_integration()
    body = am_body(am_alert("KVCacheFragmentationHigh", starts="2026-11-16T10:00:00Z"))
    response = deliver(integration, body)
    assert response.status_code == 202
    delivery = Delivery.objects.get(pk=response.json()["delivery"])
    assert delivery.status == "processed" and bytes(delivery.body) == body
    report = retention_prune(now=timezone.now() + timedelta(days=31))
    assert report.bodies == 1
    delivery.refresh_from_db()
    delivery.integration = integration
    delivery.sent = body
    return delivery


def admin_client(client):
    client.force_login(User.objects.create_superuser("root-retention", "r@example.com", "pw"))
    return client


def test_the_row_stays_with_its_counts_and_digest_and_says_when_its_body_went(pruned):
    assert bytes(pruned.body) == b"" and pruned.body_pruned_at is not None
    assert pruned.status == "processed" and pruned.accepted == 1 and pruned.size == len(pruned.sent)
    assert pruned.body_digest and pruned.headers


def test_replaying_a_pruned_body_is_a_conflict_saying_so_and_changes_nothing(pruned):
    with pytest.raises(services.RootlineError) as refused:
        services.delivery_replay(delivery_id=pruned.pk)
    assert refused.value.code == "conflict"
    assert f"pruned by retention on {pruned.body_pruned_at:%Y-%m-%d}" in str(refused.value)
    after = Delivery.objects.get(pk=pruned.pk)
    assert (after.status, after.accepted, after.error) == ("processed", 1, "")


def test_the_admin_shows_and_refuses_to_replay_a_pruned_body(pruned, client):
    client = admin_client(client)
    page = client.get(f"/admin/incidents/delivery/{pruned.pk}/change/")
    assert page.status_code == 200 and "pruned by retention on" in page.content.decode()
    answer = client.post(
        "/admin/incidents/delivery/", {"action": "replay", "_selected_action": [pruned.pk]}, follow=True
    )
    assert answer.status_code == 200 and "body was pruned by retention" in answer.content.decode()
    assert Delivery.objects.get(pk=pruned.pk).status == "processed"


def test_the_alerts_page_marks_a_pruned_body_among_the_latest_deliveries(pruned, client):
    html = admin_client(client).get("/alerts/").content.decode()
    assert "body pruned by retention" in html


def test_the_same_body_sent_again_answers_as_the_first_time(pruned, post_hook):
    answer = post_hook(pruned.integration, pruned.sent)
    assert answer.status_code == 202 and answer.json()["delivery"] == pruned.pk
    assert Delivery.objects.count() == 1
