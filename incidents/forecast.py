"""What usually comes next, for the app: an incident's likely next effects (correlate/forecast.py)
from the cascades of resolved incidents, as the API, the incident page, the queue and the
timeline show them.

Each incident keeps its cascade (`Incident.cascade`, written by correlation with its chain); the
history is the cascades of the newest `HISTORY_SIZE` resolved incidents, read once per change of
them per process. Reading only, no writes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max
from django.utils import timezone

from correlate.forecast import (
    LIMIT,
    MIN_SIMILAR,
    TOP,
    History,
    Prediction,
    Step,
    predict,
    predicted_since,
)
from correlate.scope import scope_of
from incidents.catalog import catalog as app_catalog
from incidents.models import Incident

HISTORY_SIZE = 5000  # resolved incidents read as history, newest first
MARKED_STEPS = 30  # the timeline says "predicted" for this many steps of a cascade at most

_cached: dict[str, Any] = {"stamp": None, "history": History()}
_lock = threading.Lock()


class StepRow:
    """A stored alert as `correlate.forecast.cascade` reads a member (the migration's backfill)."""

    def __init__(self, row: Mapping[str, Any]) -> None:
        self.key = str(row["id"])
        self.starts_at = row["starts_at"]
        self.false_positive = bool(row.get("false_positive"))
        self.layer = row.get("layer") or "unknown"
        self.failure_mode = row.get("failure_mode") or "other"
        self.scope = scope_of(row.get("labels") or {})


def stored_cascade(steps: Iterable[Step], rows: Mapping[str, Any]) -> list[list]:
    """A cascade as `Incident.cascade` keeps it: each step as a list, its alert by id (`rows`: the
    stored alerts by engine key)."""
    return [
        Step(s.layer, s.mode, s.place, s.at, str(rows[s.alert].pk) if s.alert in rows else "").as_list()
        for s in steps
    ]


def steps_of(incident: Incident) -> list[Step]:
    return _steps(incident.cascade)


def _steps(stored: Any) -> list[Step]:
    raw = stored if isinstance(stored, list) else []
    return [Step.from_list(item) for item in raw if isinstance(item, list) and len(item) >= 4]


def history() -> History:
    """The resolved incidents' cascades, by when they ended; read again when they change."""
    resolved = Incident.objects.visible().filter(resolved_at__isnull=False).exclude(cascade=[])
    stamp = resolved.aggregate(count=Count("id"), changed=Max("updated_at"))
    stamp_key = (stamp["count"], stamp["changed"])
    with _lock:
        if _cached["stamp"] == stamp_key:
            return _cached["history"]
    rows = resolved.order_by("-resolved_at").values_list("cascade", "resolved_at")[:HISTORY_SIZE]
    built = History.of((_steps(cascade), ended.timestamp()) for cascade, ended in rows)
    with _lock:
        _cached.update(stamp=stamp_key, history=built)
    return built


def next_effects(
    incident: Incident, *, past: History | None = None, now: datetime | None = None, limit: int = LIMIT
) -> dict[str, Any]:
    """The likely next effects of an incident still going on (none once it has resolved), with
    how many past incidents were like it and whether history or the rules named them."""
    steps = steps_of(incident)
    if incident.resolved_at is not None or not steps:
        return {"effects": [], "expired": [], "similar": 0, "from": "none"}
    now = now or timezone.now()
    past = past if past is not None else history()
    start = incident.started_at
    catalog, moment, since_start = app_catalog(), now.timestamp(), (now - start).total_seconds()
    every, similar = predict(steps, past, catalog, moment=moment, limit=None)
    live = [p for p in every if p.expires_at >= since_start][:limit]
    # What was expected and did not come within its p90 lag: the page says so, the API drops it.
    expired = [p for p in every if p.expires_at < since_start][:TOP]
    return {
        "effects": [effect_item(p, start, incident.scope) for p in live],
        "expired": [effect_item(p, start, incident.scope) for p in expired],
        "similar": similar,
        "from": "history" if similar >= MIN_SIMILAR else "rules",
    }


def effect_item(prediction: Prediction, start: datetime, scope: Any) -> dict[str, Any]:
    """One prediction as the API gives it (docs/contract.md, Incidents: next effects)."""
    after_at = _after(start, prediction.after_at)
    return {
        "failure_mode": prediction.mode,
        "layer": prediction.layer,
        "scope": prediction.place,
        "where": place_words(prediction.place, scope if isinstance(scope, dict) else {}),
        "lag_s": {"p50": round(prediction.lag_p50), "p90": round(prediction.lag_p90)},
        "seen": prediction.seen,
        "of": prediction.of,
        "source": prediction.source,
        "after": {"failure_mode": prediction.after[0], "scope": prediction.after[1], "at": after_at},
        "expected_at": _after(after_at, prediction.lag_p50),
        "expires_at": _after(start, prediction.expires_at),
    }


def _after(moment: datetime, seconds: float) -> datetime:
    """`seconds` after `moment`, held at the last moment there is (an alert dated 9999 is bad input,
    not a reason to fail the page)."""
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return datetime.max.replace(tzinfo=moment.tzinfo)


def place_words(place: str, scope: Mapping[str, str]) -> str:
    """A place as the on-call engineer reads it, named from the incident's scope."""
    workload = scope.get("deployment") or scope.get("model") or ""
    if place == "pod":
        return f"this pod ({scope['pod']})" if scope.get("pod") else "the root's pod"
    if place == "node":
        return f"its node ({scope['node']})" if scope.get("node") else "its node"
    if place == "siblings":
        return f"its siblings (other pods of {workload})" if workload else "its siblings"
    if place == "route":
        model = scope.get("model") or scope.get("route") or scope.get("deployment") or ""
        return f"the model's route ({model})" if model else "the model's route"
    return "elsewhere in " + (scope.get("namespace") or scope.get("cluster") or "the fleet")


def predicted_marks(incident: Incident, *, past: History | None = None) -> dict[int, dict[str, Any]]:
    """For each step that came after a first one: was it among the top predictions when it came,
    and since when. {alert id: {"lead_s", "source"}} for the predicted ones."""
    steps = steps_of(incident)[:MARKED_STEPS]
    if len(steps) < 2:
        return {}
    past = past if past is not None else history()
    catalog = app_catalog()
    start = incident.started_at.timestamp()
    marks: dict[int, dict[str, Any]] = {}
    for step in steps[1:]:
        before = [s for s in steps if s.at < step.at]
        since = predicted_since(before, step.key, step.at, past, catalog, start)
        if since is None or not step.alert.isdigit():
            continue
        found, similar = predict(before, past, catalog, moment=start + step.at, now=step.at, limit=TOP)
        source = next((p.source for p in found if p.key == step.key), "rules")
        marks[int(step.alert)] = {"lead_s": round(step.at - since), "source": source, "similar": similar}
    return marks


def queue_next(incidents: Sequence[Incident]) -> None:
    """Put on each open incident of the queue its likeliest next effect (`next_effect`)."""
    going = [incident for incident in incidents if incident.resolved_at is None and incident.cascade]
    if not going:
        return
    past = history()
    now = timezone.now()
    for incident in going:
        effects = next_effects(incident, past=past, now=now, limit=1)["effects"]
        incident.next_effect = effects[0] if effects else None  # type: ignore[attr-defined]
