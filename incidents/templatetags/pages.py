"""Template filters the on-call pages share: how long ago, and links that keep the queue's filters."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone

from incidents import signatures
from incidents.queue import QueueFilters

register = template.Library()


@register.filter
def age(moment: datetime | None, now: datetime | None = None) -> str:
    """How long ago, as an on-call engineer says it: '40 s', '12 min', '3 h 5 min', '4 d 2 h'."""
    if moment is None:
        return "—"
    seconds = int(((now or timezone.now()) - moment).total_seconds())
    if seconds < 60:
        return f"{max(seconds, 0)} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


@register.filter
def lag_words(seconds: float | None) -> str:
    """A lag as the on-call engineer says it: 'at once', '~40 s', '~12 min', '~1 h 20 min'."""
    if seconds is None:
        return "—"
    seconds = max(int(seconds), 0)
    if seconds < 30:
        return "at once"
    if seconds < 90:
        return f"~{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"~{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"~{hours} h {minutes} min" if minutes else f"~{hours} h"


@register.filter
def query(filters: QueueFilters, change: str) -> str:
    """`filters|query:'status=open'`: the queue's URL query with one value changed."""
    name, _, value = change.partition("=")
    return filters.query_string(**{name: value})


@register.filter
def words(name: str) -> str:
    """'in_progress' -> 'in progress', 'direct_cause' -> 'direct cause'."""
    return str(name).replace("_", " ")


@register.filter
def split_words(text: str) -> list[str]:
    return text.split()


@register.filter
def signature_words(signature: str) -> str:
    return signatures.signature_words(signature)


@register.filter
def due_words(due: datetime | None, now: datetime | None = None) -> str:
    """'postmortem due in 3 days', 'due today' or 'postmortem overdue by 2 days'."""
    if due is None:
        return ""
    left = (due - (now or timezone.now())).total_seconds()
    days = int(abs(left) // 86400)
    if left < 0:
        return f"postmortem overdue by {days} day{'s' if days != 1 else ''}" if days else "postmortem overdue"
    return f"postmortem due in {days} day{'s' if days != 1 else ''}" if days else "postmortem due today"


@register.filter
def due_class(due: datetime | None) -> str:
    return "firing" if due is not None and due < timezone.now() else "rejected"
