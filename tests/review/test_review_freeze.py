"""ISO weeks, freezing a closed week (the command and the beat task), the Monday digest, and what
the API answers for open, bad and default weeks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from django.core.management import CommandError, call_command

from incidents.models import Incident, ReviewWeek
from incidents.review.report import review
from incidents.review.weeks import BadWeek, Week
from incidents.services.review import review_digest, review_freeze
from tests.review import history


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("2026-W49", datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 12, 7, tzinfo=UTC)),
        ("2026-W01", datetime(2025, 12, 29, tzinfo=UTC), datetime(2026, 1, 5, tzinfo=UTC)),  # starts in 2025
        ("2020-W53", datetime(2020, 12, 28, tzinfo=UTC), datetime(2021, 1, 4, tzinfo=UTC)),
    ],
)
def test_iso_weeks_run_monday_to_monday_utc(text, start, end):
    week = Week.parse(text)
    assert (week.start, week.end, str(week)) == (start, end, text)
    assert Week.of(end - timedelta(seconds=1)) == week  # Sunday 23:59:59 UTC
    assert Week.of(end) == week.shifted(1)


@pytest.mark.parametrize("text", ["2021-W53", "2026-W00", "2026-W54", "2026-49", "junk", "", "2026-W4"])
def test_weeks_that_do_not_exist_are_refused(text):
    with pytest.raises(BadWeek):
        Week.parse(text)


def test_the_last_complete_week_and_the_eight_before():
    now = datetime(2026, 12, 2, 9, tzinfo=UTC)  # a Wednesday of W49
    assert str(Week.last_complete(now)) == "2026-W48"
    assert [str(w) for w in Week.parse("2026-W02").before(3)] == ["2025-W51", "2025-W52", "2026-W01"]


@pytest.mark.django_db
def test_a_frozen_week_keeps_its_figures_when_the_rows_change(monkeypatch):
    seeded = history.seed()
    week = Week.parse(history.WEEK)
    frozen = review_freeze(week=week, now=history.NOW)
    assert frozen.created and frozen.incidents == 8
    Incident.objects.filter(pk=seeded["b"].pk).update(severity="critical")
    figures = review(week, history.NOW)
    assert figures["frozen_at"] == "2026-12-02T09:00:00Z"
    assert figures["incidents"]["by_severity"] == {"info": 5, "critical": 2, "warning": 1}
    # Freezing again keeps it; --again recomputes from today's rows.
    assert not review_freeze(week=week, now=history.NOW).created
    review_freeze(week=week, now=history.NOW, again=True)
    assert review(week, history.NOW)["incidents"]["by_severity"]["critical"] == 3
    # The next week's trend reads the frozen copy.
    trend = review(week.shifted(1), history.NOW)["trend"]
    assert trend[-1]["week"] == history.WEEK and trend[-1]["frozen_at"] == "2026-12-02T09:00:00Z"


@pytest.mark.django_db
def test_an_open_week_cannot_be_frozen_and_answers_its_figures_so_far():
    history.seed()
    open_week = Week.of(history.NOW)
    with pytest.raises(Exception, match="not over yet"):
        review_freeze(week=open_week, now=history.NOW)
    figures = review(open_week, history.NOW)
    assert figures["complete"] is False and figures["as_of"] == "2026-12-02T09:00:00Z"


@pytest.mark.django_db
def test_the_command_freezes_and_mails_the_digest(settings, capsys):
    history.seed()
    settings.REVIEW_RECIPIENTS = ["sre@example.com", "lead@example.com"]
    call_command("review", "freeze", "--week", history.WEEK)
    assert "froze 2026-W47: 8 incident(s)" in capsys.readouterr().out
    assert ReviewWeek.objects.filter(week=history.WEEK).exists()
    call_command("review", "digest", "--week", history.WEEK)
    (message,) = mail.outbox
    assert message.to == ["sre@example.com", "lead@example.com"]
    assert message.subject.startswith("[Rootline] weekly reliability review 2026-W47: 8 incidents")
    assert message.body.startswith("# Weekly reliability review 2026-W47\n")
    assert "/review/?week=2026-W47" in message.body
    # The beat's digest goes once a week: a second run for the same week sends nothing.
    assert review_digest(week=Week.parse(history.WEEK), now=history.NOW, again=False) == []
    with pytest.raises(CommandError, match="no week 53"):
        call_command("review", "freeze", "--week", "2021-W53")


@pytest.mark.django_db
def test_the_api_answers_bad_weeks_with_a_400_naming_week(client):
    client.force_login(history.seed()["ana"])
    for bad in ("2026-W99", "junk", "2021-W53"):
        response = client.get(f"/api/v1/review/?week={bad}")
        assert response.status_code == 400 and response.json()["error"].startswith("week: ")
    assert client.get("/api/v1/review.csv?week=2026-W47&table=nope").status_code == 400
    zipped = client.get("/api/v1/review.csv?week=2026-W47")
    assert zipped["Content-Type"] == "application/zip" and zipped.content[:2] == b"PK"
    default = client.get("/api/v1/review/").json()
    assert default["week"] == str(Week.last_complete(datetime.now(UTC))) and default["complete"] is True
    client.logout()
    assert client.get("/api/v1/review/?week=2026-W47").status_code in (401, 403)


@pytest.mark.django_db
def test_a_week_not_yet_begun_has_no_figures_and_says_why():
    figures = review(Week.parse("2027-W10"), history.NOW)
    assert figures["complete"] is False and figures["incidents"]["count"] == 0
    assert figures["objectives"] == [] and figures["objectives_reason"] == "the week has not begun"
