"""The review of one ISO week, with the eight weeks before it as trend.

A week frozen when it closed (`ReviewWeek`) answers what was frozen; any other week is computed
now, an open one as far as it has gone (`complete: false`). The trend's weeks are read the same
way, with fewer fields (`trend_row`). Everything is JSON-ready: times as ISO 8601 in UTC.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from incidents.models import ReviewWeek
from incidents.review import alert_figures, fix_figures, incident_figures
from incidents.review.objectives import objectives
from incidents.review.weeks import Week

TREND_WEEKS = 8


def review(week: Week, now: datetime) -> dict[str, Any]:
    """The review's JSON (`../shared/CONTRACT.md`, Weekly review)."""
    frozen = ReviewWeek.objects.filter(week=str(week)).first()
    trend = trend_rows(week, now)
    own = frozen.figures if frozen is not None else week_figures(week, now, trend=trend)
    return {**own, "trend": trend}


def trend_rows(week: Week, now: datetime) -> list[dict[str, Any]]:
    """The eight weeks before `week`, oldest first: frozen where they were, else computed now."""
    weeks = week.before(TREND_WEEKS)
    frozen = {row.week: row.figures for row in ReviewWeek.objects.filter(week__in=[str(w) for w in weeks])}
    return [trend_row(frozen.get(str(w)) or week_figures(w, now, light=True)) for w in weeks]


def week_figures(
    week: Week, now: datetime, *, trend: list[dict[str, Any]] | None = None, light: bool = False
) -> dict[str, Any]:
    """A week's figures computed from the store and the metrics now; `light`: only what the
    trend shows."""
    start, end = week.start, week.end
    complete = week.complete(now)
    as_of = end if complete else now
    incidents = incident_figures.week_incidents(start, end)
    rows, objectives_reason = objectives(start, min(end, now), incidents)
    figures: dict[str, Any] = {
        "week": str(week),
        "complete": complete,
        "frozen_at": None,
        "start": start,
        "end": end,
        "as_of": as_of,
        "objectives": rows,
        "objectives_reason": objectives_reason,
        "incidents": incident_figures.incident_counts(incidents),
    }
    if light:
        figures["repeats_count"] = incident_figures.repeat_count(incidents, start)
        return jsonable(figures)
    names = alert_figures.alert_names(start, end)
    figures.update(
        {
            "incident_list": [incident.link() for incident in incidents],
            "repeats": incident_figures.repeats(incidents),
            "recurring_roots": incident_figures.recurring_roots(incidents, trend or []),
            "ignored_warnings": alert_figures.ignored_warnings(incidents, start, end),
            "noisy_rules": alert_figures.noisiest(names),
            "without_runbook": alert_figures.without_runbook(
                start, end, {r["alertname"]: r["firings"] for r in names}
            ),
            "remediation": fix_figures.remediation(start, end, as_of),
            "postmortems": fix_figures.postmortems(start, end, as_of),
        }
    )
    return jsonable(figures)


def trend_row(figures: dict[str, Any]) -> dict[str, Any]:
    """What the trend keeps of a week."""
    incidents = figures["incidents"]
    return {
        "week": figures["week"],
        "complete": figures["complete"],
        "frozen_at": figures.get("frozen_at"),
        "start": figures["start"],
        "end": figures["end"],
        "objectives": [
            {key: row.get(key) for key in ("model", "sli", "target", "attainment", "met", "budget_burned")}
            for row in figures["objectives"]
        ],
        "incidents": {
            key: incidents[key]
            for key in ("count", "by_severity", "by_failure_mode", "by_root_cause", "durations")
        },
        "repeats": figures["repeats_count"] if "repeats_count" in figures else len(figures["repeats"]),
    }


def jsonable(figures: dict[str, Any]) -> dict[str, Any]:
    """Times as ISO 8601 strings, as the frozen copy keeps them, so a live and a frozen week read alike."""
    return json.loads(json.dumps(figures, cls=DjangoJSONEncoder))
