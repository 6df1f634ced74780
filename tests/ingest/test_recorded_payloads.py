"""Recorded real payloads (tests/fixtures/<source>/) replayed through parse() and through the URL."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from correlate.events import labelset_fingerprint
from correlate.ingest import parser_for
from incidents.models import Alert, Delivery

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RECEIVED = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def bodies(source: str) -> list[Path]:
    return sorted(
        path for path in (FIXTURES / source).glob("*.json") if not path.name.endswith(".headers.json")
    )


def alert_count(source: str, document) -> int:
    if source == "events":
        return len(document) if isinstance(document, list) else 1
    if source == "grafana" and "alerts" not in document:  # the legacy webhook: one rule a body
        return 1
    return len(document["alerts"])


def received_at(path: Path) -> datetime:
    """When the body arrived: its sidecar's time for a recorded one (its alerts started before)."""
    sidecar = path.with_name(path.stem + ".headers.json")
    if sidecar.exists():
        return datetime.fromisoformat(json.loads(sidecar.read_text())["received_at"].replace("Z", "+00:00"))
    return RECEIVED


@pytest.mark.parametrize("source", ["alertmanager", "grafana", "events"])
def test_every_recorded_body_parses_completely(source):
    paths = bodies(source)
    assert len(paths) >= 3, f"expected recorded {source} bodies in {FIXTURES / source}"
    for path in paths:
        raw = path.read_bytes()
        result = parser_for(source)(raw, RECEIVED)
        assert result.rejected == [], f"{path.name}: {result.rejected}"
        assert len(result.alerts) == alert_count(source, json.loads(raw)), path.name


@pytest.mark.parametrize("path", bodies("alertmanager"), ids=lambda path: path.stem)
def test_alertmanager_bodies_keep_event_times_and_real_fingerprints(path):
    document = json.loads(path.read_bytes())
    arrived = received_at(path)
    result = parser_for("alertmanager")(path.read_bytes(), arrived)
    for parsed, raw in zip(result.alerts, document["alerts"], strict=True):
        assert parsed.fingerprint == raw["fingerprint"] == labelset_fingerprint(raw["labels"])
        assert parsed.starts_at.tzinfo is not None and parsed.starts_at < arrived
        assert (parsed.ends_at is None) == (raw["status"] == "firing")


def test_pagerduty_body_from_alertmanager_names_its_group_and_is_timed_by_arrival():
    raw = (FIXTURES / "events" / "am025_pagerduty_trigger.json").read_bytes()
    [event] = parser_for("events")(raw, RECEIVED).alerts
    document = json.loads(raw)
    assert event.fingerprint == document["dedup_key"]
    assert event.starts_at == RECEIVED  # Alertmanager's PagerDuty events carry no timestamp
    assert event.alertname == document["payload"]["custom_details"].get("alertname", event.alertname)


@pytest.mark.django_db
@pytest.mark.parametrize("source", ["alertmanager", "grafana", "events"])
def test_recorded_bodies_through_the_url_are_stored_and_processed(source, make_integration, deliver):
    integration = make_integration(source)
    expected = 0
    for path in bodies(source):
        response = deliver(integration, path.read_bytes())
        assert response.status_code == 202, (path.name, response.json())
        expected += response.json()["accepted"]
    distinct_bodies = {
        path.read_bytes() for path in bodies(source)
    }  # a byte-identical re-send is stored once
    assert Delivery.objects.filter(integration=integration, status="processed").count() == len(
        distinct_bodies
    )
    assert Alert.objects.filter(integration=integration).exists()
    assert expected >= Alert.objects.filter(integration=integration).count()
