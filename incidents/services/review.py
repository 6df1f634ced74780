"""The weekly review's writes: a closed week's figures frozen (the trend then no longer depends
on Prometheus' retention) and the Monday digest mailed to ROOTLINE_REVIEW_RECIPIENTS."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from incidents.models import ReviewWeek
from incidents.review.export import review_markdown
from incidents.review.report import review, trend_rows, week_figures
from incidents.review.weeks import Week
from incidents.services.errors import conflict
from incidents.services.mail import mail_send


@dataclass(frozen=True)
class Frozen:
    week: str
    created: bool
    objectives: int
    incidents: int


def review_freeze(*, week: Week, now: datetime | None = None, again: bool = False) -> Frozen:
    """Freeze a closed week's figures. A week already frozen is kept as it is unless `again`
    (its metrics may be gone from Prometheus by now: re-freezing can lose its objectives)."""
    now = now or timezone.now()
    if not week.complete(now):
        raise conflict(f"week: {week} is not over yet (it ends {week.end:%Y-%m-%d %H:%M} UTC)")
    with transaction.atomic():
        existing = ReviewWeek.objects.select_for_update().filter(week=str(week)).first()
        if existing is not None and not again:
            return Frozen(
                str(week), False, len(existing.figures["objectives"]), existing.figures["incidents"]["count"]
            )
        figures = week_figures(week, now, trend=trend_rows(week, now))
        figures["frozen_at"] = now.isoformat().replace("+00:00", "Z")
        ReviewWeek.objects.update_or_create(
            week=str(week),
            defaults={"start": week.start, "end": week.end, "figures": figures, "frozen_at": now},
        )
    return Frozen(str(week), existing is None, len(figures["objectives"]), figures["incidents"]["count"])


def review_digest(*, week: Week, now: datetime | None = None, again: bool = True) -> list[str]:
    """Mail the week's review (its Markdown) to ROOTLINE_REVIEW_RECIPIENTS; returns who was sent
    it. Without `again`, a week whose digest went out already is not sent twice (the beat)."""
    now = now or timezone.now()
    recipients = list(settings.REVIEW_RECIPIENTS)
    if not recipients:
        return []
    frozen = ReviewWeek.objects.filter(week=str(week)).first()
    if frozen is not None and frozen.digest_sent_at is not None and not again:
        return []
    figures = review(week, now)
    link = f"{settings.BASE_URL}/review/?week={week}"
    mail_send(
        kind="review",
        subject=f"[Rootline] weekly reliability review {week}: {digest_headline(figures)}",
        message=f"{review_markdown(figures)}\n{link}\n",
        recipients=recipients,
    )
    if frozen is not None:
        ReviewWeek.objects.filter(pk=frozen.pk).update(digest_sent_at=now)
    return recipients


def digest_headline(figures: dict) -> str:
    missed = [row for row in figures["objectives"] if not row.get("met", True)]
    words = f"{figures['incidents']['count']} incidents"
    return words + (f", {len(missed)} objectives missed" if missed else ", every objective met")
