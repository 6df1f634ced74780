"""The review page's charts as plotly figure data, built from the review's JSON and tested as
data: incidents per week by severity, the worst budget burns per week, time to resolve per week
and the week's noisy rules. The page puts each beside its div (json_script) and
`static/rootline/review.js` draws it in the page's colours: a trace's `meta.colour` and a
shape's `name` name a stylesheet variable (`--chart-<name>`), so the charts follow the light or
the dark theme. Text a sender wrote (models, alert names) is escaped: plotly reads a subset of
HTML in names, ticks and hover texts."""

from __future__ import annotations

import html
from typing import Any

from incidents.review.export import seconds_words
from incidents.review.report import trend_row

SEVERITIES = ("critical", "warning", "info")
SLI_WORDS = {
    "ttft_p99": "TTFT p99",
    "tpot_p99": "TPOT p99",
    "itl_jitter": "ITL jitter",
    "availability": "availability",
}
BURN_SERIES = 6  # the model x objective lines drawn: those that burned most in the nine weeks
TICK_CHARS = 28  # a noisy rule's name on its bar; the hover has it whole


def chart_text(value: str) -> str:
    return html.escape(value, quote=False)


def weeks_shown(review: dict[str, Any]) -> list[dict[str, Any]]:
    """The trend's eight weeks and the review's own, oldest first, in the trend's shape."""
    return [*review["trend"], trend_row(review)]


def week_axis(weeks: list[dict[str, Any]]) -> dict[str, Any]:
    """Weeks as categories named in full (hover) and ticked short. No markup in the ticks: plotly
    draws `<b>` as an inline style, which the Content-Security-Policy refuses."""
    return {
        "type": "category",
        "tickvals": [row["week"] for row in weeks],
        "ticktext": [f"W{row['week'][-2:]}" + ("" if row["complete"] else " so far") for row in weeks],
        "showgrid": False,
        "fixedrange": True,
        "automargin": True,
    }


def this_week_band(weeks: list[dict[str, Any]]) -> dict[str, Any]:
    """A band behind the review's own week, the last category."""
    last = len(weeks) - 1
    return {
        "type": "rect",
        "name": "this-week",
        "xref": "x",
        "yref": "paper",
        "x0": last - 0.5,
        "x1": last + 0.5,
        "y0": 0,
        "y1": 1,
        "layer": "below",
        "line": {"width": 0},
    }


def base_layout(height: int, **more: Any) -> dict[str, Any]:
    """No zoom or drag (a finger on a phone scrolls the page through the chart), a legend under
    the plot, room for the axes' labels."""
    return {
        "height": height,
        "margin": {"l": 8, "r": 8, "t": 8, "b": 8},
        "dragmode": False,
        "hovermode": "x unified",
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom", "traceorder": "normal"},
        "font": {"size": 12},
        **more,
    }


def count_axis(most: float) -> dict[str, Any]:
    return {
        "rangemode": "tozero",
        "dtick": max(1, -(-int(most) // 5)),
        "fixedrange": True,
        "automargin": True,
        "title": {"text": "incidents"},
    }


def incidents_chart(weeks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Incidents per week stacked by severity; None when no week had one."""
    seen = {severity for row in weeks for severity, n in row["incidents"]["by_severity"].items() if n}
    order = [s for s in SEVERITIES if s in seen] + sorted(seen - set(SEVERITIES))
    data = [
        {
            "type": "bar",
            "name": chart_text(severity),
            "x": [row["week"] for row in weeks],
            "y": [row["incidents"]["by_severity"].get(severity, 0) for row in weeks],
            "meta": {"colour": severity if severity in SEVERITIES else "other"},
            "hovertemplate": f"%{{y}} {chart_text(severity)}<extra></extra>",
        }
        for severity in order
    ]
    if not data:
        return None
    most = max((row["incidents"]["count"] for row in weeks), default=0)
    return {
        "data": data,
        "layout": base_layout(
            300,
            barmode="stack",
            xaxis=week_axis(weeks),
            yaxis=count_axis(most),
            shapes=[this_week_band(weeks)],
        ),
    }


def burn_chart(weeks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Each model x objective's budget burned per week (100% is the week's whole budget); None
    when no week had objective figures."""
    burns: dict[tuple[str, str], dict[str, float]] = {}
    for row in weeks:
        for objective in row["objectives"]:
            if objective.get("budget_burned") is not None:
                key = (objective["model"], objective["sli"])
                burns.setdefault(key, {})[row["week"]] = objective["budget_burned"] * 100
    if not burns:
        return None
    drawn = sorted(burns.items(), key=lambda item: (-max(item[1].values()), item[0]))[:BURN_SERIES]
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": f"{chart_text(model)} · {SLI_WORDS.get(sli, chart_text(sli))}",
            "x": [row["week"] for row in weeks],
            "y": [round(by_week[row["week"]], 1) if row["week"] in by_week else None for row in weeks],
            "connectgaps": False,
            "meta": {"colour": f"{n + 1}"},
            "hovertemplate": "%{y:.1f}%<extra>%{fullData.name}</extra>",
        }
        for n, ((model, sli), by_week) in enumerate(drawn)
    ]
    top = max(value for _, by_week in drawn for value in by_week.values())
    shapes = [
        this_week_band(weeks),
        {
            "type": "line",
            "name": "limit",
            "xref": "paper",
            "x0": 0,
            "x1": 1,
            "y0": 100,
            "y1": 100,
            "line": {"width": 1.5, "dash": "dash"},
        },
    ]
    layout = base_layout(
        320,
        xaxis=week_axis(weeks),
        yaxis={
            "range": [0, max(110.0, top * 1.08)],
            "ticksuffix": "%",
            "fixedrange": True,
            "automargin": True,
            "title": {"text": "budget burned"},
        },
        shapes=shapes,
        hovermode="closest",
    )
    return {"data": data, "layout": layout}


def resolve_chart(weeks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Median and p90 time to resolve per week, in minutes or (past three hours) in hours."""
    summaries = [row["incidents"]["durations"]["resolve_s"] for row in weeks]
    known = [s[key] for s in summaries for key in ("median", "p90") if s[key] is not None]
    if not known:
        return None
    unit, size = ("h", 3600.0) if max(known) > 3 * 3600 else ("min", 60.0)
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": words,
            "x": [row["week"] for row in weeks],
            "y": [round(s[key] / size, 2) if s[key] is not None else None for s in summaries],
            "customdata": [
                f"{seconds_words(s[key])} ({s['n']} resolved)" if s[key] is not None else ""
                for s in summaries
            ],
            "connectgaps": False,
            "line": {"dash": "dot"} if key == "p90" else {},
            "meta": {"colour": key},
            "hovertemplate": f"{words} %{{customdata}}<extra></extra>",
        }
        for key, words in (("median", "median"), ("p90", "p90"))
    ]
    layout = base_layout(
        300,
        xaxis=week_axis(weeks),
        yaxis={"rangemode": "tozero", "fixedrange": True, "automargin": True, "title": {"text": unit}},
        shapes=[this_week_band(weeks)],
    )
    return {"data": data, "layout": layout}


def noisy_chart(noisy: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The week's noisy rules by firings, most on top: those in an incident and the rest."""
    if not noisy:
        return None
    rows = sorted(noisy, key=lambda r: (-r["firings"], r["alertname"]))
    names = [chart_text(r["alertname"]) for r in rows]
    short = [
        chart_text(
            r["alertname"] if len(r["alertname"]) <= TICK_CHARS else r["alertname"][: TICK_CHARS - 1] + "…"
        )
        for r in rows
    ]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": words,
            "y": names,
            "x": [value(r) for r in rows],
            "meta": {"colour": colour},
            "hovertemplate": f"%{{x}} {words}<extra></extra>",
        }
        for words, colour, value in (
            ("in an incident", "in-incident", lambda r: r["in_incident"]),
            ("alone or judged false positive", "alone", lambda r: r["firings"] - r["in_incident"]),
        )
    ]
    most = max(r["firings"] for r in rows)
    layout = base_layout(
        110 + 26 * len(rows),
        barmode="stack",
        hovermode="y unified",
        xaxis={
            "rangemode": "tozero",
            "dtick": max(1, -(-most // 5)),
            "fixedrange": True,
            "automargin": True,
            "title": {"text": "firings"},
        },
        yaxis={
            "type": "category",
            "tickvals": names,
            "ticktext": short,
            "autorange": "reversed",
            "fixedrange": True,
            "automargin": True,
        },
    )
    return {"data": data, "layout": layout}


def review_charts(review: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """Each chart of the page by name, None where there is nothing to draw."""
    weeks = weeks_shown(review)
    return {
        "incidents": incidents_chart(weeks),
        "burn": burn_chart(weeks),
        "resolve": resolve_chart(weeks),
        "noisy": noisy_chart(review["noisy_rules"]),
    }
