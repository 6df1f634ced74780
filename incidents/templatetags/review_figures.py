"""Template filters for the review's JSON figures: its ISO times as times the page's time zone
shows, its seconds and shares in the words of its Markdown."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils.dateparse import parse_datetime

from incidents.review.export import seconds_words, share_words, target_words

register = template.Library()


@register.filter
def moment(text: str | None) -> datetime | None:
    """'2026-11-16T10:00:00Z' -> an aware datetime, for `|date` (which shows it in the page's zone)."""
    if not text:
        return None
    try:
        return parse_datetime(text)
    except ValueError:
        return None


@register.filter
def duration(seconds: float | None) -> str:
    """'45 s', '12 min', '2 h 05 min'; '–' when not known."""
    return seconds_words(seconds)


@register.filter
def share(value: float | None, digits: int = 1) -> str:
    """0.9987 -> '99.9%' (`|share:3` for more digits); '–' when not known."""
    return share_words(value, int(digits))


@register.filter
def target(row: dict[str, Any]) -> str:
    """An objective's target: '≤ 2000 ms in 99% of 5-min windows' or '99.90%'."""
    return target_words(row)


@register.filter
def lateness(seconds: float | None) -> str:
    """How late, in the largest units that say it: '40 min', '3 h 5 min', '4 d 2 h'."""
    if seconds is None:
        return "–"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{max(minutes, 1)} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"
