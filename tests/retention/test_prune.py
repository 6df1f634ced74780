"""Retention over a seeded year (tests/retention/year.py): exactly the old bodies and the old
unreferenced alerts go, nothing referenced is lost, /metrics shrinks by what went, and the weekly
review of every week of the year reads the same after a prune as before."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.db.models import Sum
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from incidents import tasks
from incidents.models import (
    Alert,
    AlertRollup,
    Decision,
    Delivery,
    Incident,
    IncidentAction,
    IncidentEdge,
    MatrixCell,
    Postmortem,
    RemediationItem,
    RootCandidate,
)
from incidents.review.report import review, week_figures
from incidents.review.weeks import Week
from incidents.services import retention
from tests.retention import year as history

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_marks_left():
    """A bounded run's mark lives in the cache (Redis in CI), across tests."""
    keys = [retention.mark_key(kind) for kind in ("bodies-processed", "bodies-rejected", "alerts")]
    cache.delete_many(keys)
    yield
    cache.delete_many(keys)


@pytest.fixture
def year():
    return history.seed(timezone.now())


def deliveries() -> dict[int, tuple]:
    return {
        row.pk: (
            row.status, row.size, row.headers, row.accepted, row.rejected, row.body_digest, row.error,
            row.received_at, row.processed_at, bytes(row.body), row.body_pruned_at,
        )
        for row in Delivery.objects.all()
    }  # fmt: skip


def referenced() -> dict[str, object]:
    """Everything a prune must never change: incidents, their alerts, and what refers to alerts."""
    return {
        "incidents": list(Incident.objects.order_by("pk").values("pk", "root_alert_id", "chain", "cascade")),
        "members": sorted(Alert.objects.filter(incident__isnull=False).values_list("pk", "incident_id")),
        "edges": sorted(IncidentEdge.objects.values_list("pk", "cause_id", "effect_id")),
        "candidates": sorted(RootCandidate.objects.values_list("pk", "alert_id")),
        "actions": sorted(IncidentAction.objects.values_list("pk", "alert_id")),
        "decisions": sorted(Decision.objects.values_list("pk", "alert_keys")),
        "postmortems": sorted(
            Postmortem.incidents.through.objects.values_list("postmortem_id", "incident_id")
        ),
        "remediations": sorted(RemediationItem.objects.values_list("pk", "incident_id")),
        "matrix": sorted(MatrixCell.objects.values_list("pk", "evidence")),
    }


def alert_ids() -> set[int]:
    return set(Alert.objects.values_list("pk", flat=True))


def every_week(now) -> dict[str, dict]:
    """The review's figures of every week of the year (and the one before it began)."""
    week, last, figures = Week.of(now - timedelta(days=history.DAYS + 7)), Week.of(now), {}
    while week <= last:
        figures[str(week)] = week_figures(week, now)
        week = week.shifted(1)
    return figures


def scraped(client) -> dict[tuple[str, str], float]:
    text = client.get("/metrics").content.decode()
    return {
        (sample.name, sample.labels.get("status", "")): sample.value
        for family in text_string_to_metric_families(text)
        if family.name in ("rootline_alerts", "rootline_deliveries")
        for sample in family.samples
    }


def pruned_firings(year) -> int:
    """Firings among the alerts that should go (changes are not firings)."""
    return Alert.objects.filter(pk__in=year.alerts_going, kind=Alert.Kind.ALERT).count()


def assert_pruned_as_the_policy_says(year, before_deliveries, before_references) -> None:
    assert alert_ids() == year.alerts_staying
    after = deliveries()
    assert set(after) == set(before_deliveries)  # every delivery row stays
    for pk, row in after.items():
        old = before_deliveries[pk]
        if pk in year.bodies_going:
            assert row[:9] == old[:9] and row[9] == b"" and row[10] is not None, pk
        else:
            assert row == old, pk
    assert referenced() == before_references


def test_a_prune_takes_exactly_the_old_bodies_and_unreferenced_alerts_and_the_review_reads_the_same(
    year, client
):
    assert alert_ids() == year.alerts_going | year.alerts_staying  # every seeded alert is filed
    reviewed = year.now + timedelta(days=1)
    figures = every_week(reviewed)
    before = (deliveries(), referenced(), scraped(client))
    firings = pruned_firings(year)
    old_weeks = [  # whole weeks of the year older than the alerts' retention
        f
        for f in figures.values()
        if reviewed - timedelta(days=360) < Week.parse(f["week"]).start < reviewed - timedelta(days=100)
    ]
    assert len(old_weeks) > 30
    # The old weeks' alert figures did count the alerts that go: the comparison below means something.
    noisy = [{row["alertname"] for row in f["noisy_rules"]} for f in old_weeks]
    assert all(
        {"NoisyThing", "(unnamed)", "TeamLinkedRule", "KVCacheFragmentationHigh"} <= names for names in noisy
    )
    assert all("TeamLinkedRule" not in {r["alertname"] for r in f["without_runbook"]} for f in old_weeks)
    assert any(f["ignored_warnings"] for f in old_weeks)

    report = retention.retention_prune()

    assert (
        report.finished
        and report.bodies == len(year.bodies_going)
        and report.alerts == len(year.alerts_going)
    )
    assert report.kept_alerts > 0
    assert_pruned_as_the_policy_says(year, before[0], before[1])
    assert AlertRollup.objects.aggregate(n=Sum("firings"))["n"] == firings
    assert every_week(reviewed) == figures
    week = Week.of(reviewed - timedelta(days=200))
    assert review(week, reviewed)["noisy_rules"] == figures[str(week)]["noisy_rules"]
    metrics = scraped(client)
    assert metrics[("rootline_alerts", "resolved")] == before[2][("rootline_alerts", "resolved")] - len(
        year.alerts_going
    )
    assert metrics[("rootline_alerts", "firing")] == before[2][("rootline_alerts", "firing")]
    assert {k: v for k, v in metrics.items() if k[0] == "rootline_deliveries"} == {
        k: v for k, v in before[2].items() if k[0] == "rootline_deliveries"
    }


def test_a_dry_run_changes_nothing_and_a_second_prune_removes_nothing_more(year):
    before = (alert_ids(), deliveries(), referenced())
    out = StringIO()
    call_command("prune", "--dry-run", stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith(f"delivery bodies: would empty {len(year.bodies_going)} (")
    assert lines[1].startswith(f"alerts: would delete {len(year.alerts_going)},")
    assert (alert_ids(), deliveries(), referenced()) == before and not AlertRollup.objects.exists()

    out = StringIO()
    call_command("prune", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"delivery bodies: emptied {len(year.bodies_going)} (")
    assert lines[1].startswith(f"alerts: deleted {len(year.alerts_going)},")
    after = (alert_ids(), deliveries(), referenced(), list(AlertRollup.objects.values()))

    out = StringIO()
    call_command("prune", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("delivery bodies: emptied 0 (0 bytes)") and lines[1].startswith(
        "alerts: deleted 0,"
    )
    assert (alert_ids(), deliveries(), referenced(), list(AlertRollup.objects.values())) == after


def test_the_beat_task_stops_at_its_batch_bound_and_later_runs_finish_the_same_prune(year):
    reviewed = year.now + timedelta(days=1)
    figures = every_week(reviewed)
    before = (deliveries(), referenced())
    firings = pruned_firings(year)

    first = tasks.prune(batch=5, max_batches=3)
    assert first == {"bodies": 15, "alerts": 0, "finished": False}
    assert Delivery.objects.filter(body_pruned_at__isnull=False).count() == 15

    runs, bodies, alerts = [first], 15, 0
    while not runs[-1]["finished"]:
        assert len(runs) < 200, "the bounded runs never finished"
        runs.append(tasks.prune(batch=5, max_batches=3))
        bodies += runs[-1]["bodies"]
        alerts += runs[-1]["alerts"]
    assert len(runs) > 10  # the year took many bounded runs, each going on where the last stopped
    assert (bodies, alerts) == (len(year.bodies_going), len(year.alerts_going))
    assert_pruned_as_the_policy_says(year, *before)
    # A day's alerts rolled up over several batches add up, once each.
    assert AlertRollup.objects.aggregate(n=Sum("firings"))["n"] == firings
    assert every_week(reviewed) == figures
    assert tasks.prune() == {"bodies": 0, "alerts": 0, "finished": True}
    assert alert_ids() == year.alerts_staying


def test_longer_retention_settings_keep_more(year, settings):
    settings.RETAIN_BODIES_DAYS = 400
    settings.RETAIN_ALERTS_DAYS = 200
    ended = dict(Alert.objects.filter(pk__in=year.alerts_going).values_list("pk", "ends_at"))
    report = retention.retention_prune()
    assert report.bodies == 0
    goes = {pk for pk, at in ended.items() if at < report.alerts_before}
    assert 0 < len(goes) < len(year.alerts_going) and report.alerts == len(goes)
    assert alert_ids() == year.alerts_going - goes | year.alerts_staying


def test_bounded_runs_resume_between_alerts_that_started_at_the_same_moment():
    started = timezone.now() - timedelta(days=100)
    same = {history.alert(started, "SameMoment").pk for _ in range(5)}
    runs = [tasks.prune(batch=2, max_batches=3)]  # two (empty) body batches, then one of alerts
    while not runs[-1]["finished"]:
        assert len(runs) < 10
        runs.append(tasks.prune(batch=2, max_batches=3))
    assert [run["alerts"] for run in runs] == [2, 2, 1]
    assert not Alert.objects.filter(pk__in=same).exists()
    assert AlertRollup.objects.get(alertname="SameMoment").firings == 5
