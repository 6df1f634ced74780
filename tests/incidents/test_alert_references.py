"""An alert's integration, first delivery and incident, and an edge's or root candidate's incident
and alerts, are kept by Django's deletion collector, not by database constraints
(incidents/models.py says why): deleting what they refer to still protects, clears or deletes
them, on PostgreSQL as on SQLite."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db.models import ProtectedError

from incidents.models import Alert, Delivery, Incident, IncidentEdge, Integration, RootCandidate

AT = datetime(2026, 1, 5, 3, 0, tzinfo=UTC)


@pytest.fixture
def alert_with_references(db):
    integration = Integration.objects.create(kind="alertmanager", name="am-refs", token_digest="x")
    delivery = Delivery.objects.create(integration=integration, body=b"{}", received_at=AT)
    incident = Incident.objects.create(title="refs", started_at=AT)
    alert = Alert.objects.create(
        fingerprint="refs-1",
        starts_at=AT,
        status="firing",
        labels={"alertname": "X"},
        integration=integration,
        first_delivery=delivery,
        incident=incident,
        received_at=AT,
    )
    return alert


@pytest.mark.django_db
def test_deleting_an_integration_with_alerts_is_refused(alert_with_references):
    alert_with_references.first_delivery.delete()  # the delivery protects the integration too
    with pytest.raises(ProtectedError) as refused:
        alert_with_references.integration.delete()
    assert set(refused.value.protected_objects) == {alert_with_references}
    assert Integration.objects.filter(pk=alert_with_references.integration_id).exists()


@pytest.mark.django_db
def test_deleting_an_incident_or_a_delivery_clears_the_alerts_reference(alert_with_references):
    alert_with_references.incident.delete()
    alert_with_references.first_delivery.delete()
    alert = Alert.objects.get(pk=alert_with_references.pk)
    assert alert.incident_id is None and alert.first_delivery_id is None


@pytest.mark.django_db
def test_deleting_an_alert_or_an_incident_deletes_their_edges_and_root_candidates(alert_with_references):
    incident, cause = alert_with_references.incident, alert_with_references
    effects = [
        Alert.objects.create(
            fingerprint=f"refs-{n}",
            starts_at=AT,
            status="firing",
            labels={"alertname": "Y"},
            integration=cause.integration,
            incident=incident,
            received_at=AT,
        )
        for n in (2, 3)
    ]
    for effect in effects:
        IncidentEdge.objects.create(
            incident=incident, cause=cause, effect=effect, rule="x->y", lag_seconds=1.0
        )
    IncidentEdge.objects.create(
        incident=incident, cause=effects[0], effect=effects[1], rule="y->y", lag_seconds=1.0
    )
    for rank, alert in enumerate([cause, *effects]):
        RootCandidate.objects.create(
            incident=incident, alert=alert, rank=rank, confidence=0.5, explanation=""
        )
    cause.delete()
    assert list(IncidentEdge.objects.values_list("rule", flat=True)) == ["y->y"]
    assert sorted(RootCandidate.objects.values_list("alert_id", flat=True)) == sorted(e.pk for e in effects)
    incident.delete()
    assert not IncidentEdge.objects.exists() and not RootCandidate.objects.exists()
    assert Alert.objects.filter(pk__in=[e.pk for e in effects], incident__isnull=True).count() == 2
