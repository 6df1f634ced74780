"""Replay fleets in time order and score `forecast.predict` on the effects that really came.

At every moment an alert fires, the engine groups what had fired before it (alerts that end
later are still firing then) and the incident it joins is the one it extends; an alert that
brings a step that incident did not have is a *next effect*. The prediction it is scored
against was made from that incident's cascade before it, against the history of incidents that
had ended by then (earlier fleets, and the same fleet's earlier incidents). It is a hit when its
(layer, mode, place) is among the top `TOP` predictions still live at that moment; its lead is
how long it had been among them without a break, counted from the step after which it first was.

Unclassified alerts (`other`) and changes are not effects: no rule names them, and a change is
a person's act. The incidents' groupings of earlier moments are the engine's as of the effect (a
member that joined an incident later in the replay is not known before it joined).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby

from correlate.batch import correlate
from correlate.catalog import Catalog
from correlate.events import FIRING, Alert
from correlate.forecast import (
    TOP,
    History,
    Step,
    StepKey,
    cascade,
    place_of,
    predict,
    predicted_since,
    root_member,
)
from correlate.results import Incident

NOT_EFFECTS = frozenset({"other", "change"})


@dataclass(frozen=True)
class Effect:
    fleet: str
    alertname: str
    key: StepKey
    at: datetime
    hit: bool
    mode_hit: bool  # its failure mode among the top predictions, whatever the place
    lead: float  # seconds it had been predicted for (0 when missed)
    source: str  # where the predictions came from: history | rules
    similar: int


@dataclass
class Fleet:
    name: str
    alerts: list[Alert]

    @property
    def first(self) -> datetime:
        return min(alert.starts_at for alert in self.alerts)


def replay(fleets: Iterable[Fleet], catalog: Catalog) -> list[Effect]:
    """Every next effect of the fleets, replayed one after the other in the order they began."""
    ordered = sorted(fleets, key=lambda fleet: (fleet.first, fleet.name))
    history = History.of(
        (cascade(incident.members, _root_key(incident)), _ended(incident))
        for fleet in ordered
        for incident in correlate(fleet.alerts, catalog=catalog)
    )
    return [effect for fleet in ordered for effect in _fleet_effects(fleet, history, catalog)]


def _root_key(incident: Incident) -> str | None:
    return incident.root.alert_key if incident.root else None


def _ended(incident: Incident) -> float:
    """When the incident ended (epoch seconds); never, while one of its alerts still fires."""
    ends = [member.ends_at for member in incident.members]
    known = [end for end in ends if end is not None]
    return float("inf") if len(known) < len(ends) else max(known).timestamp()


def as_of(alerts: Sequence[Alert], moment: datetime) -> list[Alert]:
    """The alerts that had fired before `moment`, as they were then (not yet ended)."""
    return [
        alert
        if alert.ends_at is None or alert.ends_at < moment
        else dataclasses.replace(alert, ends_at=None, status=FIRING)  # fmt: skip
        for alert in alerts
        if alert.starts_at < moment
    ]


def _fleet_effects(fleet: Fleet, history: History, catalog: Catalog) -> list[Effect]:
    found: list[Effect] = []
    by_time = sorted(fleet.alerts, key=lambda alert: alert.starts_at)
    for moment, arriving in groupby(by_time, key=lambda alert: alert.starts_at):
        before = correlate(as_of(by_time, moment), catalog=catalog)
        if not before:
            continue
        incident_of = {key: incident for incident in before for key in incident.alert_keys}
        after = correlate(as_of(by_time, moment) + _as_firing(arriving), catalog=catalog)
        for incident in after:
            found += _effects_in(fleet.name, incident, incident_of, moment, history, catalog)
    return found


def _as_firing(alerts: Iterable[Alert]) -> list[Alert]:
    return [dataclasses.replace(alert, ends_at=None, status=FIRING) for alert in alerts]


def _effects_in(
    fleet: str,
    incident: Incident,
    incident_of: dict[str, Incident],
    moment: datetime,
    history: History,
    catalog: Catalog,
) -> list[Effect]:
    new = [m for m in incident.members if m.starts_at == moment and not m.false_positive]
    earlier = [incident_of[m.key] for m in incident.members if m.key in incident_of]
    if not new or not earlier:
        return []
    prior = max(earlier, key=lambda known: sum(m.key in incident.alert_keys for m in known.members))
    root_key = _root_key(prior)
    root = root_member(prior.members, root_key)
    steps = cascade(prior.members, root_key)
    have = {step.key for step in steps}
    start = min(m.starts_at for m in prior.members)
    now = (moment - start).total_seconds()
    effects: dict[StepKey, Effect] = {}
    for member in sorted(new, key=lambda m: m.key):
        key = (member.failure_mode or "other", place_of(root.scope, member.scope))
        if key[0] in NOT_EFFECTS or key in have or key in effects:
            continue
        effects[key] = _scored(fleet, member.alertname, key, moment, steps, now, history, catalog)
    return list(effects.values())


def _scored(
    fleet: str,
    alertname: str,
    key: StepKey,
    moment: datetime,
    steps: Sequence[Step],
    now: float,
    history: History,
    catalog: Catalog,
) -> Effect:
    start = moment.timestamp() - now
    top, similar = predict(steps, history, catalog, moment=moment.timestamp(), now=now, limit=TOP)
    since = predicted_since(steps, key, now, history, catalog, start)
    hit = since is not None
    lead = now - since if since is not None else 0.0
    return Effect(
        fleet=fleet,
        alertname=alertname,
        key=key,
        at=moment,
        hit=hit,
        mode_hit=key[0] in {p.mode for p in top},
        lead=lead,
        source=top[0].source if top else "none",
        similar=similar,
    )
