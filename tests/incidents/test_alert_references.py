"""An alert's integration, first delivery and incident are kept by Django's deletion collector,
not by database constraints (incidents/models.py says why): deleting what an alert refers to
still protects it or clears the reference, on PostgreSQL as on SQLite."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
from django.db.models import ProtectedError

from incidents.models import Alert, Delivery, Incident, Integration

AT = datetime(2026, 1, 5, 3, 0, tzinfo=timezone.utc)


@pytest.fixture
def alert_with_references(db):
    integration = Integration.objects.create(kind="alertmanager", name="am-refs", token_digest="x")
    delivery = Delivery.objects.create(integration=integration, body=b"{}", received_at=AT)
    incident = Incident.objects.create(title="refs", started_at=AT)
    alert = Alert.objects.create(fingerprint="refs-1", starts_at=AT, status="firing", labels={"alertname": "X"},
                                 integration=integration, first_delivery=delivery, incident=incident, received_at=AT)
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
