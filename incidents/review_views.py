"""`/review/?week=YYYY-Www`: the weekly reliability review as a page (the figures of
`incidents/review/report.py`, the same the API and the Monday digest give), with the weeks
around it a click away, its charts drawn by `static/rootline/review.js`, and its Markdown, CSV
and JSON linked. A week that is not one answers 400 with what is wrong."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from incidents.plotly_assets import plotly_page_assets
from incidents.review.charts import SEVERITIES, SLI_WORDS, review_charts, weeks_shown
from incidents.review.export import REMEDIATION_WORDS
from incidents.review.report import TREND_WEEKS, review
from incidents.review.weeks import BadWeek, Week

DURATIONS = (
    ("detect_s", "Detect"),
    ("acknowledge_s", "Acknowledge"),
    ("mitigate_s", "Mitigate"),
    ("resolve_s", "Resolve"),
)
BREAKDOWNS = (  # (key, words, whether its values are our names, shown in words, or a sender's)
    ("by_failure_mode", "Root cause", True),
    ("by_layer", "Layer", True),
    ("by_cluster", "Cluster", False),
    ("by_model", "Model", False),
)
BURNERS_SHOWN = 5  # an objective's incidents named; the rest counted


def now() -> datetime:
    """The page's present (which week is open, what "this week" is); tests set it."""
    return timezone.now()


@login_required
def review_page(request: HttpRequest) -> HttpResponse:
    present = now()
    asked = request.GET.get("week", "")
    try:
        week = Week.parse(asked) if asked else Week.last_complete(present)
    except BadWeek as exc:
        return render(
            request,
            "incidents/review.html",
            {**navigation(None, present), "error": str(exc).removeprefix("week: ")},
            status=400,
        )
    figures = review(week, present)
    return render(request, "incidents/review.html", {**navigation(week, present), **page(figures)})


def navigation(week: Week | None, present: datetime) -> dict[str, Any]:
    """The weeks a click away: the one before, the one after (never past the open week), this
    week and the last complete one."""
    current = Week.of(present)
    return {
        "week": week,
        "previous": week.shifted(-1) if week else None,
        "next": week.shifted(1) if week and week < current else None,
        "this_week": current,
        "last_complete": Week.last_complete(present),
    }


def page(figures: dict[str, Any]) -> dict[str, Any]:
    incidents = figures["incidents"]
    charts = review_charts(figures)
    return {
        "figures": figures,
        "severities": [
            (severity, n)
            for severity in (*SEVERITIES, *sorted(set(incidents["by_severity"]) - set(SEVERITIES)))
            if (n := incidents["by_severity"].get(severity))
        ],
        "durations": [(words, incidents["durations"][key]) for key, words in DURATIONS],
        "breakdowns": [(words, list(incidents[key].items()), ours) for key, words, ours in BREAKDOWNS],
        "repeats": [{**r, "more_earlier": r["seen_before"] - len(r["earlier"])} for r in figures["repeats"]],
        "objectives": [objective_row(row) for row in figures["objectives"]],
        "remediation": [(key, words, figures["remediation"][key]) for key, words in REMEDIATION_WORDS],
        "trend": trend_table(figures),
        "trend_weeks": TREND_WEEKS,
        "charts": {
            name: {"id": f"chart-{name}", "data_id": f"chart-{name}-data", "figure": figure}
            for name, figure in charts.items()
            if figure is not None
        },
        **plotly_page_assets(),
    }


def objective_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "burners": row["incidents"][:BURNERS_SHOWN],
        "more_burners": max(0, len(row["incidents"]) - BURNERS_SHOWN),
        "over_budget": (row.get("budget_burned") or 0) > 1,
    }


def trend_table(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """The nine weeks, oldest first, the review's own last."""
    rows = weeks_shown(figures)
    return [
        {
            "week": row["week"],
            "this": n == len(rows) - 1,
            "complete": row["complete"],
            "frozen": bool(row.get("frozen_at")),
            "count": row["incidents"]["count"],
            "critical": row["incidents"]["by_severity"].get("critical", 0),
            "repeats": row["repeats"],
            "resolve": row["incidents"]["durations"]["resolve_s"],
            "worst_burn": worst_burn_words(row),
        }
        for n, row in enumerate(rows)
    ]


def worst_burn_words(row: dict[str, Any]) -> str:
    """As the Markdown says it, without its escapes: the page's template escapes."""
    burned = [o for o in row["objectives"] if o.get("budget_burned") is not None]
    if not burned:
        return "–"
    worst = max(burned, key=lambda o: o["budget_burned"])
    return (
        f"{worst['budget_burned'] * 100:.1f}% ({worst['model']}, {SLI_WORDS.get(worst['sli'], worst['sli'])})"
    )
