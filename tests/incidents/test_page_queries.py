"""The on-call's two pages read in a fixed number of queries: the triage queue whatever the number
of incidents, the incident page whatever the number of alerts, actions and notes it holds (a
small incident's page reads a little less: it lists its alerts instead of summing them up, and
counts no links it does not show; both incidents here are past those limits)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.incidents.conftest import am_body, cascade, storm_incident_of

pytestmark = pytest.mark.django_db

# session, user, the page's reads; a page that reads per row grows past these at once.
TRIAGE_QUERIES = 12
INCIDENT_QUERIES = 17  # 16, and the evidence gaps its "Evidence incomplete" line names


def queries_of(client, path: str) -> int:
    """Queries of one view of the page, in a session that has seen a page before (the first one
    also reads the person's time zone into the session)."""
    assert client.get("/accounts/profile/").status_code == 200
    with CaptureQueriesContext(connection) as captured:
        answer = client.get(path)
    assert answer.status_code == 200, path
    return len(captured)


def fleets(deliver, integration, clusters: int) -> None:
    for copy in range(clusters):
        for alert in cascade():
            deliver(integration, am_body(dict(alert, labels={**alert["labels"], "cluster": f"c{copy}"})))


def test_the_triage_queue_reads_in_the_same_queries_for_one_incident_or_many(
    make_integration, deliver, client
):
    client.force_login(User.objects.create_user("viewer"))
    integration = make_integration()
    fleets(deliver, integration, 1)
    few = queries_of(client, "/?status=all")
    fleets(deliver, integration, 5)
    many = queries_of(client, "/?status=all")
    assert few == many <= TRIAGE_QUERIES


def test_the_incident_page_reads_in_the_same_queries_for_a_storm_and_the_storm_twice_its_size(
    make_integration, deliver, client, users, api
):
    viewer = User.objects.create_user("viewer")
    ana = users("ana", "responder")
    integration = make_integration()
    incident = storm_incident_of(deliver, integration, fragmented=230, killed=210)
    before = incident.alerts.count()
    api(ana, "post", f"/api/v1/incidents/{incident.pk}/actions/", {"action": "note", "text": "one"})
    client.force_login(viewer)
    few = queries_of(client, f"/incidents/{incident.pk}/")

    grown = storm_incident_of(deliver, integration, fragmented=460, killed=420)
    assert grown.pk == incident.pk and grown.alerts.count() >= 2 * before
    for text in ("two", "three", "four", "five", "six"):
        api(ana, "post", f"/api/v1/incidents/{incident.pk}/actions/", {"action": "note", "text": text})
    api(ana, "post", f"/api/v1/incidents/{incident.pk}/actions/", {"action": "acknowledge"})
    client.force_login(viewer)
    many = queries_of(client, f"/incidents/{incident.pk}/")
    assert few == many <= INCIDENT_QUERIES
