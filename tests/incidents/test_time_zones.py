"""Pages say their time zone and follow the person's (UTC unless they set theirs); the API and
exports stay in UTC; a change of time zone is audited."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from incidents.evidence.points import labels_key, pack_points
from incidents.models import AuditRecord, EvidenceSeries, Profile

pytestmark = pytest.mark.django_db


@pytest.fixture
def ana(client):
    user = User.objects.create_user("ana")
    client.force_login(user)
    return user


def started_shown(html: str) -> str:
    return re.search(r"started (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", html).group(1)


def test_pages_are_in_utc_until_a_person_sets_their_time_zone(incident, client, ana):
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "Times on this page are in UTC" in page
    assert started_shown(page) == f"{incident.started_at:%Y-%m-%d %H:%M:%S}"

    answer = client.post("/accounts/profile/", {"time_zone": "Asia/Kolkata"})
    assert answer.status_code == 302
    page = client.get(f"/incidents/{incident.pk}/").content.decode()
    assert "Times on this page are in Asia/Kolkata" in page
    assert started_shown(page) == f"{incident.started_at + timedelta(hours=5, minutes=30):%Y-%m-%d %H:%M:%S}"
    for path in ("/", "/alerts/", f"/incidents/{incident.pk}/evidence/", "/accounts/profile/"):
        assert "Times on this page are in Asia/Kolkata" in client.get(path).content.decode(), path

    detail = client.get(f"/api/v1/incidents/{incident.pk}/").json()
    assert detail["started_at"].endswith("Z")
    [record] = AuditRecord.objects.for_object("user", "ana")
    assert (record.via, record.field, record.old, record.new) == ("page", "time_zone", "UTC", "Asia/Kolkata")


def test_the_time_zone_is_kept_for_the_next_session(incident, client, ana):
    client.post("/accounts/profile/", {"time_zone": "America/New_York"})
    client.logout()
    client.force_login(ana)
    assert "Times on this page are in America/New_York" in client.get("/").content.decode()


def test_an_unknown_time_zone_is_refused_and_changes_nothing(client, ana):
    answer = client.post("/accounts/profile/", {"time_zone": "Mars/Olympus_Mons"}, follow=True)
    assert "expected an IANA time zone name" in answer.content.decode()
    assert not Profile.objects.filter(user=ana).exclude(time_zone="UTC").exists()
    assert not AuditRecord.objects.exists()


def test_evidence_charts_are_drawn_in_the_page_time_zone(incident, client, ana):
    start = incident.started_at.replace(microsecond=0)
    EvidenceSeries.objects.create(
        incident=incident,
        signal="kv_pool_usage",
        query="vllm:kv_cache_usage_perc",
        labels={"pod": "p"},
        labels_key=labels_key({"pod": "p"}),
        step_seconds=15.0,
        start=start,
        end=start + timedelta(seconds=300),
        points=pack_points([(start.timestamp() + 15 * i, 0.5) for i in range(20)]),
        point_count=20,
        source="import",
        fetched_at=start,
    )

    def first_x() -> tuple[str, str]:
        html = client.get(f"/incidents/{incident.pk}/evidence/").content.decode()
        data = re.findall(r'<script id="chart-\d+-data" type="application/json">(.*?)</script>', html, re.S)
        assert data, "no chart drawn"
        figure = json.loads(data[0])
        return figure["data"][0]["x"][0], figure["layout"]["title"]["subtitle"]["text"]

    assert first_x() == (f"{start:%Y-%m-%dT%H:%M:%S}", "times in UTC")
    client.post("/accounts/profile/", {"time_zone": "Asia/Kolkata"})
    assert first_x() == (
        f"{start + timedelta(hours=5, minutes=30):%Y-%m-%dT%H:%M:%S}",
        "times in Asia/Kolkata",
    )
