"""Attainment of each model's objectives over a week, and which incidents burned the budget.

The rules pack records, per model and per source (engine or gateway, label `slo_source`), the
p99 TTFT, the p99 TPOT and the ITL jitter (p99 - p50) of each 5-minute window, and the rates of
requests and of requests the server failed (`llmops:slo_*`, rules/src/*.yml). A latency
objective holds in a window when its value is at most the target (the pack's alerts fire above
it); its attainment is the share of the week's windows with data that held, and the budget is
the share allowed to miss (1 - window_share): `budget_burned` 1.0 is the whole week's budget.
Availability is 1 - errors / requests over the week, read from the gateway where it reports the
model (what clients saw), else from the engines; its budget is 1 - the availability target.

A window's miss, or its failed requests, is charged to each incident of the model open then
(from its onset to its resolution, or the week's end). Each figure is read through the
evidence reader: Prometheus, else the local store (an imported export), never guessed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from incidents.evidence import queries as q
from incidents.evidence.points import RangeSeries
from incidents.postmortems.figures import Reader, Window
from incidents.review.incident_figures import WeekIncident
from incidents.slo import objectives_for

STEP = 300.0  # the objectives' windows: 5 minutes
GATEWAY = "gateway"


@dataclass(frozen=True)
class LatencySli:
    name: str
    metric: str
    target_field: str
    label: str


LATENCY = (
    LatencySli("ttft_p99", "llmops:slo_ttft_p99_seconds:5m", "ttft_p99_s", "p99 time to first token"),
    LatencySli("tpot_p99", "llmops:slo_tpot_p99_seconds:5m", "tpot_p99_s", "p99 time per output token"),
    LatencySli(
        "itl_jitter", "llmops:slo_itl_jitter_seconds:5m", "itl_jitter_s", "inter-token latency jitter"
    ),
)
REQUESTS, ERRORS = "llmops:slo_requests:rate5m", "llmops:slo_request_errors:rate5m"
SLI_ORDER = {"ttft_p99": 0, "tpot_p99": 1, "itl_jitter": 2, "availability": 3}


def week_window(start: datetime, until: datetime) -> Window:
    """Windows end at each step from the week's first 5 minutes to `until` (the week's end, or now)."""
    first = math.ceil(start.timestamp() / STEP) * STEP + STEP
    last = math.floor(until.timestamp() / STEP) * STEP
    return Window(first, max(first, last), STEP)


def objectives(
    start: datetime, until: datetime, incidents: list[WeekIncident]
) -> tuple[list[dict[str, Any]], str]:
    """(objectives, why none): one row per model and objective with data in the week."""
    if until <= start:
        return [], "the week has not begun"
    window = week_window(start, until)
    reader = Reader()
    errors: list[str] = []
    rows: list[dict[str, Any]] = []
    by_model = incidents_by_model(incidents, until)
    try:
        for sli in LATENCY:
            series, error = read(reader, sli.metric, window)
            errors += [error] if error else []
            for model, points in per_model_max(series).items():
                rows.append(latency_row(sli, model, points, by_model.get(short(model), [])))
        requests, error = read(reader, REQUESTS, window)
        errors += [error] if error else []
        failed, error = read(reader, ERRORS, window)
        errors += [error] if error else []
        for model, (total, bad) in availability_series(requests, failed).items():
            row = availability_row(model, total, bad, by_model.get(short(model), []))
            if row is not None:
                rows.append(row)
    finally:
        reader.close()
    rows.sort(key=lambda r: (r["model"], SLI_ORDER[r["sli"]]))
    return rows, "" if rows else "; ".join(dict.fromkeys(errors)) or "no objective series in the week"


def read(reader: Reader, metric: str, window: Window) -> tuple[list[RangeSeries], str]:
    series, _source, error = reader.read(q.EvidenceQuery(signal=metric, kind=q.GAUGE, metric=metric), window)
    return series, error


def per_model_max(series: list[RangeSeries]) -> dict[str, dict[float, float]]:
    """Per model, the worst source's value at each step (a model served by two engines meets its
    objective in a window only where both did)."""
    out: dict[str, dict[float, float]] = defaultdict(dict)
    for one in series:
        model = one.labels.get("model_name", "")
        if not model:
            continue
        points = out[model]
        for t, v in one.points:
            if math.isfinite(v):
                points[t] = max(v, points.get(t, v))
    return {model: points for model, points in out.items() if points}


def latency_row(
    sli: LatencySli,
    model: str,
    points: dict[float, float],
    incidents: list[tuple[float, float, WeekIncident]],
) -> dict[str, Any]:
    objectives_ = objectives_for(model)
    target = getattr(objectives_, sli.target_field)
    allowed = 1.0 - objectives_.window_share
    missed = sorted(t for t, v in points.items() if v > target)
    windows = len(points)
    charged: dict[int, float] = defaultdict(float)
    for t in missed:
        for incident in open_at(incidents, t - STEP, t):
            charged[incident.id] += 1
    budget = windows * allowed
    return {
        "model": model,
        "sli": sli.name,
        "label": sli.label,
        "target": target,
        "unit": "s",
        "window_share": objectives_.window_share,
        "windows": windows,
        "windows_missed": len(missed),
        "attainment": round(1 - len(missed) / windows, 6),
        "met": 1 - len(missed) / windows >= objectives_.window_share,
        "budget_burned": round(len(missed) / budget, 6) if budget else None,
        "incidents": burned_by(charged, incidents, budget),
    }


def availability_series(
    requests: list[RangeSeries], failed: list[RangeSeries]
) -> dict[str, tuple[dict[float, float], dict[float, float]]]:
    """Per model, requests and failures per window (rate x 5 minutes) from the gateway where it
    reports the model, else summed over its engines."""

    def by_source(series: list[RangeSeries]) -> dict[str, dict[str, dict[float, float]]]:
        out: dict[str, dict[str, dict[float, float]]] = defaultdict(lambda: defaultdict(dict))
        for one in series:
            model = one.labels.get("model_name", "")
            if not model:
                continue
            points = out[model][one.labels.get("slo_source", "")]
            for t, v in one.points:
                if math.isfinite(v):
                    points[t] = points.get(t, 0.0) + v * STEP
        return out

    totals, bads = by_source(requests), by_source(failed)
    result = {}
    for model, sources in totals.items():
        chosen = [GATEWAY] if GATEWAY in sources else [s for s in sources if s != GATEWAY]
        total: dict[float, float] = defaultdict(float)
        bad: dict[float, float] = defaultdict(float)
        for source in chosen:
            for t, v in sources[source].items():
                total[t] += v
            for t, v in bads.get(model, {}).get(source, {}).items():
                bad[t] += v
        result[model] = (dict(total), dict(bad))
    return result


def availability_row(
    model: str,
    total: dict[float, float],
    bad: dict[float, float],
    incidents: list[tuple[float, float, WeekIncident]],
) -> dict[str, Any] | None:
    requests = sum(total.values())
    if requests <= 0:
        return None
    failed = sum(bad.values())
    target = objectives_for(model).availability
    budget = requests * (1.0 - target)
    charged: dict[int, float] = defaultdict(float)
    for t, v in bad.items():
        for incident in open_at(incidents, t - STEP, t):
            charged[incident.id] += v
    return {
        "model": model,
        "sli": "availability",
        "label": "availability",
        "target": target,
        "unit": "ratio",
        "requests": round(requests),
        "failed": round(failed),
        "attainment": round(1 - failed / requests, 6),
        "met": 1 - failed / requests >= target,
        "budget_burned": round(failed / budget, 6) if budget else None,
        "incidents": burned_by(charged, incidents, budget),
    }


def incidents_by_model(
    incidents: list[WeekIncident], until: datetime
) -> dict[str, list[tuple[float, float, WeekIncident]]]:
    """Each model's incidents as (onset, end) in unix seconds; unresolved ones run to `until`."""
    out: dict[str, list[tuple[float, float, WeekIncident]]] = defaultdict(list)
    for incident in incidents:
        onset = incident.onset or incident.started_at
        end = incident.resolved_at or until
        if incident.model != "unknown":
            out[short(incident.model)].append((onset.timestamp(), end.timestamp(), incident))
    return out


def short(model: str) -> str:
    """A model without its organisation: engines name "org/model" where labels may not."""
    return model.rsplit("/", 1)[-1]


def open_at(
    incidents: list[tuple[float, float, WeekIncident]], start: float, end: float
) -> list[WeekIncident]:
    return [incident for onset, stop, incident in incidents if onset < end and stop > start]


def burned_by(
    charged: dict[int, float], incidents: list[tuple[float, float, WeekIncident]], budget: float
) -> list[dict[str, Any]]:
    """The incidents charged with part of the budget, largest first."""
    by_id = {incident.id: incident for _, _, incident in incidents}
    rows = [
        {
            **by_id[incident_id].link(),
            "budget_burned": round(amount / budget, 6) if budget else None,
            "charged": round(amount, 3),
        }
        for incident_id, amount in charged.items()
    ]
    return sorted(rows, key=lambda r: (-(r["charged"]), r["id"]))
