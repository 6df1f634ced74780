"""The evidence page: each signal's series as a chart with its bands and the timeline's events
as markers, the timeline below, and the evidence that could not be collected. Figures are
built here as plotly figure data (tested as data); the browser only draws them with the
plotly.js the installed plotly package ships, served by `plotly_js` (no CDN)."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import Any

import plotly
import plotly.graph_objects as go
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

from correlate.catalog import Band
from correlate.matrix import COLUMNS, band_title
from correlate.series import Series
from correlate.timeline import Item
from incidents.models import Incident
from incidents.plotly_assets import PLOTLY_JS, plotly_page_assets, plotly_styles
from incidents.timeline import Evidence, incident_evidence, incident_matrix

BAND_COLOURS = {
    "green": "rgba(26,127,55,0.07)",
    "yellow": "rgba(242,201,76,0.18)",
    "red": "rgba(179,38,30,0.12)",
}
EVENT_STYLE = {
    "alert_fired": ("#b3261e", "triangle-up"),
    "alert_resolved": ("#1a7f37", "triangle-down"),
    "change": ("#7b3fa0", "diamond"),
    "action": ("#1d4ed8", "circle"),
    "note": ("#5b6475", "circle-open"),
    "threshold": ("#9a6700", "x"),
}


def _when(seconds: float) -> datetime:
    return _wall_clock(datetime.fromtimestamp(seconds, tz=UTC))


def _wall_clock(moment: datetime) -> datetime:
    """The moment as the page's time zone reads it, without an offset: Plotly draws the wall time
    it is given and drops any offset."""
    return timezone.localtime(moment).replace(tzinfo=None)


def _band_shapes(band: Band, low: float, high: float) -> list[dict[str, Any]]:
    """Horizontal bands spanning the chart: green, yellow, red from the catalog's lines."""
    lines = [band.yellow, band.red] if band.yellow is not None else [band.red]
    edges_up = [low, *lines, high] if band.direction == "above" else [high, *lines, low]
    names = ["green", "yellow", "red"] if band.yellow is not None else ["green", "red"]
    shapes = []
    for name, start, end in zip(names, edges_up, edges_up[1:], strict=False):
        shapes.append(
            {
                "type": "rect",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": min(start, end),
                "y1": max(start, end),
                "fillcolor": BAND_COLOURS[name],
                "line": {"width": 0},
                "layer": "below",
                "name": f"band {name}",
            }
        )
    for value, name in zip(lines, names[1:], strict=False):
        shapes.append(
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": value,
                "y1": value,
                "line": {"color": "#b3261e" if name == "red" else "#9a6700", "width": 1, "dash": "dash"},
                "name": f"{name} line",
            }
        )
    return shapes


def signal_figure(signal: str, series: list[Series], band: Band | None, events: list[Item]) -> dict[str, Any]:
    figure = go.Figure()
    values = [v for s in series for _, v in s.points]
    for s in series:
        figure.add_trace(
            go.Scatter(
                x=[_when(t) for t, _ in s.points],
                y=[v for _, v in s.points],
                mode="lines",
                name=plotly_text(s.where or str(s.id)),
                line={"width": 1.5},
                meta={"series_id": s.id},
            )
        )
    low = min(values, default=0.0)
    high = max(values, default=1.0)
    if band is not None:
        lines = [band.red] + ([band.yellow] if band.yellow is not None else [])
        low, high = min(low, *lines), max(high, *lines)
    # A flat series gets room in proportion to its size: a padding of 1 around 5.4e11 bytes made
    # ticks differing in the twelfth digit.
    pad = (high - low) * 0.08 or max(abs(high) * 0.05, 1.0)
    low, high = low - pad, high + pad
    if events:
        figure.add_trace(
            go.Scatter(
                x=[_wall_clock(e.at) for e in events],
                y=[high - pad / 2] * len(events),
                mode="markers",
                name="events",
                marker={
                    "color": [EVENT_STYLE.get(e.kind, ("#333", "circle"))[0] for e in events],
                    "symbol": [EVENT_STYLE.get(e.kind, ("#333", "circle"))[1] for e in events],
                    "size": 10,
                },
                text=[plotly_text(f"{_wall_clock(e.at):%H:%M:%S} {e.title}") for e in events],
                hoverinfo="text",
                meta={"events": True},
            )
        )
    title = band_title(band.title) if band else signal.replace("_", " ")
    unit = f" ({band.unit})" if band and band.unit else ""
    figure.update_layout(
        title={
            "text": f"{title}{unit}",
            "font": {"size": 14},
            "subtitle": {"text": f"times in {timezone.get_current_timezone_name()}", "font": {"size": 11}},
        },
        height=300,
        margin={"l": 60, "r": 20, "t": 56, "b": 40},
        shapes=_band_shapes(band, low, high) if band else [],
        yaxis=value_axis(signal, low, high),
        legend={"orientation": "h", "y": -0.2},
        template="plotly_white",
        meta={"signal": signal, "band": band.name if band else None},
    )
    return figure.to_plotly_json()


def value_axis(signal: str, low: float, high: float) -> dict[str, Any]:
    """SI prefixes (k, M, G), not Plotly's default "B" for billions, which on a bytes series read
    as bytes ("150B" for 150 GB); a bytes signal's ticks say B after the prefix."""
    axis: dict[str, Any] = {"range": [low, high], "exponentformat": "SI"}
    if signal.endswith("bytes"):
        axis["ticksuffix"] = "B"
    return axis


def evidence_figures(evidence: Evidence, timeline: list[Item]) -> list[dict[str, Any]]:
    """One figure per signal, judged signals first; every figure carries the timeline's events
    (threshold crossings only of its own signal)."""
    events = [item for item in timeline if item.kind != "alert_resolved"]
    by_signal: dict[str, list[Series]] = {}
    for s in evidence.series:
        if s.points:
            by_signal.setdefault(s.signal, []).append(s)
    figures = []
    for signal, series in sorted(
        by_signal.items(), key=lambda kv: (not any(evidence.bands.get(s.id) for s in kv[1]), kv[0])
    ):
        band = next((evidence.bands[s.id] for s in series if evidence.bands.get(s.id)), None)
        judged = [s for s in series if evidence.bands.get(s.id)] if band else series
        own = [e for e in events if e.kind != "threshold" or e.signal == signal]
        figures.append(signal_figure(signal, judged or series, band, own))
    return figures


@login_required
def evidence_page(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = Incident.objects.select_related("root_alert").filter(pk=incident_id).first()
    if incident is None:
        raise Http404(f"no incident {incident_id}")
    evidence = incident_evidence(incident)
    timeline = evidence.timeline()
    return render(
        request,
        "incidents/evidence.html",
        {
            "incident": incident,
            **chart_context(evidence, timeline),
            "timeline": timeline,
            "durations": evidence.durations(),
            "gaps": evidence.gaps,
            "matrix": [
                {"layer": row["layer"], "cells": [row[column] for column in COLUMNS]}
                for row in incident_matrix(incident, evidence=evidence)
            ],
        },
    )


def chart_context(evidence: Evidence, timeline: list[Item]) -> dict[str, Any]:
    """The evidence charts as a page embeds them (the JSON beside each div, drawn by evidence.js)
    and the Plotly assets they need; the evidence page and the postmortem's print view share it."""
    return {
        "figures": [
            {
                "id": f"chart-{i}",
                "data_id": f"chart-{i}-data",
                "figure": json.loads(plotly.io.to_json(figure, validate=False)),
            }
            for i, figure in enumerate(evidence_figures(evidence, timeline))
        ],
        **plotly_page_assets(),
    }


@require_GET
@cache_control(max_age=31536000, immutable=True, public=True)
def plotly_js(request: HttpRequest, version: str) -> FileResponse:
    """plotly.js from the installed plotly package; the version in the URL busts caches on upgrade."""
    if version != plotly.__version__ or not PLOTLY_JS.exists():
        raise Http404("no such plotly.js")
    return FileResponse(PLOTLY_JS.open("rb"), content_type="text/javascript; charset=utf-8")


@require_GET
@cache_control(max_age=31536000, immutable=True, public=True)
def plotly_css(request: HttpRequest, version: str) -> HttpResponse:
    """plotly.js's own style rules as a stylesheet (see `incidents/plotly_assets.py`)."""
    if version != plotly.__version__ or not PLOTLY_JS.exists():
        raise Http404("no such plotly stylesheet")
    return HttpResponse(plotly_styles()[0], content_type="text/css; charset=utf-8")


def plotly_text(value: str) -> str:
    """Plotly renders a subset of HTML in names and hover texts; what senders wrote (pod names,
    alert titles, notes) is escaped so it shows as text, never as markup or a link."""
    return html.escape(value, quote=False)
