"""Are the fixes landing: remediation items due in the week, overdue, completed on time,
verified by their data or regressed; postmortems due in the week or still unpublished.

"As of" is the week's end for a closed week and now for the open one: an item done after the
week closed is overdue in that week's review (a frozen week keeps what was true when it froze).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import F, Q

from incidents.models import Incident, Postmortem, RemediationItem
from incidents.postmortems.policy import SEVERITY_RANK

Status = RemediationItem.Status
LISTED = 100  # each list's length; its count is whole


def remediation(start: datetime, end: datetime, as_of: datetime) -> dict[str, Any]:
    items = RemediationItem.objects.filter(suggested=False).select_related("owner", "incident")
    # Not done by then; a regressed item is open again (as `is_overdue` has it).
    open_then = Q(done_at__isnull=True) | Q(done_at__gte=as_of) | Q(status=Status.REGRESSED)
    groups = {
        "due": items.filter(due_at__gte=start, due_at__lt=end).exclude(status=Status.WONT_DO),
        "overdue": items.filter(open_then, due_at__lt=as_of).exclude(status=Status.WONT_DO),
        "completed_on_time": items.filter(done_at__gte=start, done_at__lt=end, done_at__lte=F("due_at")),
        "verified": items.filter(verified_at__gte=start, verified_at__lt=end),
        "regressed": items.filter(status=Status.REGRESSED, verified_at__lt=end),
    }
    return {
        name: [item_row(item, as_of) for item in query.order_by("due_at", "id")[:LISTED]]
        for name, query in groups.items()
    }


def item_row(item: RemediationItem, as_of: datetime) -> dict[str, Any]:
    still_open = item.done_at is None or item.done_at > as_of or item.status == Status.REGRESSED
    late = (as_of - item.due_at).total_seconds() if still_open else None
    return {
        "id": item.pk,
        "title": item.title,
        "owner": item.owner.username if item.owner else None,
        "status": item.status,
        "due_at": item.due_at,
        "done_at": item.done_at,
        "verified_at": item.verified_at,
        "overdue_s": round(late, 3) if late is not None and late > 0 else None,
        "incident": {"id": item.incident_id, "title": item.incident.title},
    }


def postmortems(start: datetime, end: datetime, as_of: datetime) -> dict[str, Any]:
    """Incidents the policy asks a postmortem of, due in the week; and those due by `as_of`
    whose postmortem was not published by then (none written counts)."""
    days = timedelta(days=settings.POSTMORTEM_DUE_DAYS)
    severities = [
        level for level, rank in SEVERITY_RANK.items() if rank >= SEVERITY_RANK[settings.POSTMORTEM_SEVERITY]
    ]
    needing = Incident.objects.visible().filter(severity__in=severities, resolved_at__isnull=False)
    due = list(
        needing.filter(resolved_at__gte=start - days, resolved_at__lt=end - days).order_by(
            "resolved_at", "id"
        )
    )
    late = needing.filter(resolved_at__lt=as_of - days).exclude(
        postmortems__status=Postmortem.Status.PUBLISHED, postmortems__published_at__lt=as_of
    )
    return {
        "due": postmortem_rows(due, days, as_of),
        "unpublished": postmortem_rows(list(late.order_by("-resolved_at", "-id")[:LISTED]), days, as_of),
        "unpublished_count": late.count(),
    }


def postmortem_rows(incidents: list[Incident], days: timedelta, as_of: datetime) -> list[dict[str, Any]]:
    written: dict[int, Postmortem] = {}
    for postmortem in (
        Postmortem.objects.filter(incidents__in=incidents).prefetch_related("incidents").order_by("id")
    ):
        for incident in postmortem.incidents.all():
            written.setdefault(incident.pk, postmortem)
    rows = []
    for incident in incidents:
        found = written.get(incident.pk)
        due_at = incident.resolved_at + days if incident.resolved_at else None
        published = found is not None and found.published_at is not None and found.published_at < as_of
        rows.append(
            {
                "incident": {"id": incident.pk, "title": incident.title, "severity": incident.severity},
                "due_at": due_at,
                "postmortem": {"id": found.pk, "status": found.status} if found else None,
                "published": published,
                "overdue_s": round((as_of - due_at).total_seconds(), 3)
                if due_at and not published and as_of > due_at
                else None,
            }
        )
    return rows
