"""What the week's alerts say about the rules: warnings waved off before trouble, rules that
fire without ever being part of an incident, and alerts that page with no runbook.

- An ignored warning is an alert judged a false positive that fired at most
  `ROOTLINE_REVIEW_IGNORED_HOURS` (default 6) before a later alert of an incident of the week on
  the same scope (its own incident, or one on the same cluster sharing its deployment, model,
  namespace or node): the March lesson, the fragmentation alert waved off before the OOMs.
- A firing belongs to an incident when correlation put it in one with other alerts and it was
  not judged a false positive; a rule that fired alone every time is never in one.
- Alerts retention pruned (docs/retention.md) count through their roll-ups (`AlertRollup`, per UTC
  day and name): they were in no incident and not judged, so they add firings and runbook links.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Q, QuerySet

from correlate.scope import scope_of
from incidents.markdown import safe_href
from incidents.models import Alert, AlertRollup, IncidentAction
from incidents.review.incident_figures import WeekIncident
from incidents.runbooks import runbook_file

NOISY_SHOWN = 25
NO_RUNBOOK_SHOWN = 50
SCOPE_KEYS = ("deployment", "model", "namespace", "node")


def ignored_window() -> timedelta:
    return timedelta(hours=settings.REVIEW_IGNORED_HOURS)


def ignored_warnings(incidents: list[WeekIncident], start: datetime, end: datetime) -> list[dict[str, Any]]:
    if not incidents:
        return []
    window = ignored_window()
    judged = list(
        Alert.objects.filter(
            false_positive=True,
            starts_at__gte=start - window,
            starts_at__lt=max(i.started_at for i in incidents) + window,
        )
        .exclude(kind=Alert.Kind.CHANGE)
        .values(
            "id",
            "alertname",
            "starts_at",
            "labels",
            "incident_id",
            "correlation_key",
            "layer",
            "failure_mode",
        )
    )
    if not judged:
        return []
    by_id = {i.id: i for i in incidents}
    judgements = judgement_of([row["id"] for row in judged])
    found = []
    for row in judged:
        place = scope_of(row["labels"] or {})
        for incident in incidents:
            if not (row["incident_id"] == incident.id or same_scope(place, row["correlation_key"], incident)):
                continue
            followed = next_alert(incident.id, row["id"], row["starts_at"], window)
            if followed is None:
                continue
            at, name = followed
            by, judged_at = judgements.get(row["id"], (None, None))
            found.append(
                {
                    "alert_id": row["id"],
                    "alertname": row["alertname"],
                    "starts_at": row["starts_at"],
                    "layer": row["layer"],
                    "failure_mode": row["failure_mode"],
                    "judged_by": by,
                    "judged_at": judged_at,
                    "incident": by_id[incident.id].link(),
                    "followed_by": name,
                    "lead_s": round((at - row["starts_at"]).total_seconds(), 3),
                }
            )
    return sorted(found, key=lambda item: (item["starts_at"], item["alert_id"], item["incident"]["id"]))


def next_alert(
    incident_id: int, alert_id: int, after: datetime, window: timedelta
) -> tuple[datetime, str] | None:
    """The incident's first alert not judged a false positive within `window` after `after`."""
    return (
        Alert.objects.filter(
            incident_id=incident_id, false_positive=False, starts_at__gt=after, starts_at__lte=after + window
        )
        .exclude(kind=Alert.Kind.CHANGE)
        .exclude(pk=alert_id)
        .order_by("starts_at", "id")
        .values_list("starts_at", "alertname")
        .first()
    )


def same_scope(place: Any, cluster: str, incident: WeekIncident) -> bool:
    if incident.cluster not in (cluster, "unknown") and cluster:
        return False
    mine = {
        "deployment": place.deployment,
        "model": place.model,
        "namespace": place.namespace,
        "node": place.node,
    }
    return any(mine[key] and incident.scope.get(key) == mine[key] for key in SCOPE_KEYS)


def judgement_of(alert_ids: list[int]) -> dict[int, tuple[str | None, datetime]]:
    """Who judged each alert a false positive, and when (the first such action)."""
    out: dict[int, tuple[str | None, datetime]] = {}
    for alert_id, by, at in (
        IncidentAction.objects.filter(action="false_positive", alert_id__in=alert_ids)
        .order_by("at", "id")
        .values_list("alert_id", "by__username", "at")
    ):
        out.setdefault(alert_id, (by, at))
    return out


def noisy_rules(start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Per alert name: firings in the week, the share in an incident, never in one; the rules
    that least often belonged to an incident first, then the most frequent."""
    return noisiest(alert_names(start, end))


def noisiest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = sorted(
        rows, key=lambda r: (float(r["in_incident_share"]), -int(r["firings"]), str(r["alertname"]))
    )
    return [row for row in rows if float(row["in_incident_share"]) < 1][:NOISY_SHOWN]


def alert_names(start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Every alert name that fired in the week, with its firings, in an incident and judged."""
    week = Q(starts_at__gte=start, starts_at__lt=end)
    # Incidents with more than one of the week's alerts: correlation found a cascade there.
    cascades = (
        Alert.objects.filter(week, incident_id__isnull=False)
        .values("incident_id")
        .annotate(size=Count("id"))
        .filter(size__gt=1)
        .values("incident_id")
    )
    per_name: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for name, firings in rolled_up(start, end).filter(firings__gt=0).values_list("alertname", "firings"):
        per_name[name or "(unnamed)"][0] += firings
    for name, firings, in_incident, judged in (
        Alert.objects.filter(week, kind=Alert.Kind.ALERT)
        .values("alertname")
        .annotate(
            firings=Count("id"),
            in_incident=Count("id", filter=Q(false_positive=False, incident_id__in=cascades)),
            judged=Count("id", filter=Q(false_positive=True)),
        )
        .values_list("alertname", "firings", "in_incident", "judged")
    ):
        counts = per_name[name or "(unnamed)"]
        counts[0] += firings
        counts[1] += in_incident
        counts[2] += judged
    rows: list[dict[str, Any]] = [
        {
            "alertname": name,
            "firings": firings,
            "in_incident": in_incident,
            "in_incident_share": round(in_incident / firings, 4),
            "never_in_incident": in_incident == 0,
            "judged_false_positive": judged,
        }
        for name, (firings, in_incident, judged) in per_name.items()
    ]
    return rows


def without_runbook(start: datetime, end: datetime, names: dict[str, int]) -> list[dict[str, Any]]:
    """Alert names that fired in the week (`names`: firings by name, as `noisy_rules` counted
    them) with no runbook: none in the pack, none of their own."""
    missing = {name: n for name, n in names.items() if name and runbook_file(name) is None}
    if not missing:
        return []
    linked: set[str] = set()
    for name, url, other in (
        Alert.objects.filter(starts_at__gte=start, starts_at__lt=end, alertname__in=list(missing))
        .filter(Q(annotations__has_key="runbook_url") | Q(annotations__has_key="runbook"))
        .values_list("alertname", "annotations__runbook_url", "annotations__runbook")
        .distinct()
    ):
        if own_runbook_linked(url, other):
            linked.add(name)
    linked.update(
        rolled_up(start, end)
        .filter(alertname__in=list(missing), runbook_linked=True)
        .values_list("alertname", flat=True)
    )
    bare = sorted(
        ((n, name) for name, n in missing.items() if name not in linked), key=lambda p: (-p[0], p[1])
    )
    return [{"alertname": name, "firings": n} for n, name in bare[:NO_RUNBOOK_SHOWN]]


def own_runbook_linked(url: Any, other: Any) -> bool:
    """Whether an alert's annotations (`runbook_url`, else `runbook`) link a runbook of its own
    that a page may show; retention keeps this of the alerts it prunes."""
    own = str(url or other or "")
    return own.startswith(("https://", "http://")) and bool(safe_href(own))


def rolled_up(start: datetime, end: datetime) -> QuerySet[AlertRollup]:
    """The roll-ups of the UTC days that lie wholly in [start, end) (a review's week is seven)."""
    first, last = first_whole_day(start), end.astimezone(UTC).date()
    return AlertRollup.objects.filter(day__gte=first, day__lt=last)


def first_whole_day(moment: datetime) -> date:
    moment = moment.astimezone(UTC)
    day = moment.date()
    return day if moment == datetime.combine(day, time(), UTC) else day + timedelta(days=1)
