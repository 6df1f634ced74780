"""What usually comes next: the likely next effects of an open incident, and how soon.

An incident's *cascade* is its distinct steps, each a (layer, failure mode, place) first seen at
some second after the incident's first alert fired; the place is where the step happened relative
to the root: on the root's own pod (`pod`), on its node (`node`), on the other pods of its
deployment or model (`siblings`), on the model's route or gateway (`route`), or `elsewhere`.
Places, not pod names, are what recur: the next incident like this one happens on another pod.

`predict` reads the cascade so far of an open incident against the cascades of resolved ones:

- history: the past cascades that hold every step seen so far (backing off to those that hold
  its latest step) are "incidents like this one"; each step they had after the latest step's
  counterpart that this one has not yet is a likely next effect, with how many of them had it
  (`seen` of `of`) and its lag after that counterpart (p50, p90). A step they had before it is
  a cause this incident has not shown, not what comes next;
- rules: when fewer than `MIN_SIMILAR` past incidents are like it (or they name fewer than `TOP`
  effects), the catalog's causal rules from the modes seen so far name the effects (or the rest
  of them): in the place the effect's layer usually shows (a latency SLO on the route, a crash on
  the pod) before the others the rule allows, then the effects of the latest step first (what
  comes next follows what came last), then the deeper effect first (a cascade runs from deep
  causes to shallow effects: the next step is the nearest one down), with the rule's `max_lag`
  as the p90 and half of it as the p50.

A prediction expires when its p90 lag has passed since the step it counts from (never sooner
than `MIN_LIFETIME`: alerts fire on evaluation ticks and `for:` windows, so an effect that came
"at once" in history still arrives minutes later). Nothing here knows Django: the app stores
cascades on incidents and calls `predict` (incidents/forecast.py).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from statistics import median, quantiles
from typing import Protocol

from correlate.catalog import ANY_MODE, Catalog
from correlate.scope import Scope

MIN_SIMILAR = 3  # fewer past incidents like this one than this: the rules speak instead
MAX_SIMILAR = 200  # the newest past incidents like this one that are read (a common first step
# is in thousands of them; the recent ones tell what this fleet does now)
MIN_LIFETIME = 300.0  # seconds a prediction lives at least, whatever its p90 lag
TOP = 3  # what the incident page shows, and what "predicted" on the timeline means
LIMIT = 5  # what the API returns
MEMO_SIZE = 10_000  # shapes of cascade whose reading of history is kept

PLACES = ("pod", "node", "siblings", "route", "elsewhere")
SOURCES = ("history", "rules")
# A rule's scope relation, seen from the cause's place, as the place of the effect.
_RELATION_PLACE = {
    "same_pod": None,  # the cause's own place
    "same_gpu": None,
    "same_group": None,
    "unplaced": "node",
    "same_node": "node",
    "sibling": "siblings",
    "gateway": "route",
}
# Where each layer's alerts usually sit: of the places a rule's relations allow, this one is
# preferred for its effect (`_effect_places`). A latency SLO is the route's, a crash the pod's.
_LAYER_PLACE = {"hardware": "node", "engine": "pod", "platform": "pod", "serving": "route"}

StepKey = tuple[str, str]  # (failure mode, place)


@dataclass(frozen=True)
class Step:
    layer: str
    mode: str
    place: str
    at: float  # seconds after the incident's first alert fired
    alert: str = ""  # the first alert of the step (an engine key, or the app's alert id)

    @property
    def key(self) -> StepKey:
        return (self.mode, self.place)

    def as_list(self) -> list:
        return [self.layer, self.mode, self.place, round(self.at, 1), self.alert]

    @classmethod
    def from_list(cls, item: Sequence) -> Step:
        layer, mode, place, at, *rest = item
        return cls(str(layer), str(mode), str(place), float(at), str(rest[0]) if rest else "")


@dataclass(frozen=True)
class Prediction:
    layer: str
    mode: str
    place: str
    lag_p50: float
    lag_p90: float
    seen: int
    of: int
    source: str  # one of SOURCES
    after: StepKey  # the step the lags count from
    after_at: float  # when that step came, seconds after the incident's first alert

    @property
    def key(self) -> StepKey:
        return (self.mode, self.place)

    @property
    def expires_at(self) -> float:
        return self.after_at + max(self.lag_p90, MIN_LIFETIME)


class Placed(Protocol):
    """What a cascade reads of an alert: an engine `Member`, or a stored alert (incidents/forecast.py)."""

    @property
    def key(self) -> str: ...
    @property
    def starts_at(self) -> datetime: ...
    @property
    def false_positive(self) -> bool: ...
    @property
    def layer(self) -> str: ...
    @property
    def failure_mode(self) -> str: ...
    @property
    def scope(self) -> Scope: ...


def place_of(root: Scope, scope: Scope) -> str:
    """Where `scope` is, seen from the root's scope (see the module's docstring)."""
    if root.pod and scope.pod and (scope.pod == root.pod or (scope.group and scope.group == root.group)):
        return "pod"
    if _same_node(root, scope) or _unplaced_on(root, scope):
        return "node"
    if not _same_workload(root, scope):
        return "elsewhere"
    if scope.pod or (scope.deployment and not scope.model and not scope.route):
        return "siblings"  # another pod of the root's workload, or the deployment itself
    return "route"


def _same_node(root: Scope, scope: Scope) -> bool:
    if root.node and scope.node and root.node == scope.node:
        return True
    return bool(root.gpus and scope.gpus and not root.gpus.isdisjoint(scope.gpus))


def _unplaced_on(root: Scope, scope: Scope) -> bool:
    """A pod that no label places, in the incident of a node or GPU fault: it runs there (the
    engine tied it to the fault by timing alone, its `unplaced` relation)."""
    return bool(not root.pod and (root.node or root.gpus) and scope.pod and not scope.node and not scope.gpus)


def _same_workload(root: Scope, scope: Scope) -> bool:
    return bool(
        (root.deployment and root.deployment == scope.deployment)
        or (root.model and root.model == scope.model)
        or (root.route and root.route == scope.route)
        or not root.gateway_keys.isdisjoint(scope.gateway_keys)
    )


def _fired(member: Placed) -> tuple:
    return (member.starts_at, member.key)


def root_member(members: Sequence[Placed], root_key: str | None) -> Placed:
    """The member places are seen from: the root, else the earliest to fire."""
    return next((m for m in members if m.key == root_key), None) or min(members, key=_fired)


def cascade(members: Iterable[Placed], root_key: str | None) -> tuple[Step, ...]:
    """An incident's distinct steps in firing order, timed from its first alert; places are seen
    from the root's scope (the earliest member's when there is no root). False positives are no
    step."""
    every = list(members)
    real = [m for m in every if not m.false_positive]
    if not real:
        return ()
    root = root_member(real, root_key)
    start = min(m.starts_at for m in every)  # the incident's start, as the app stores it
    first: dict[StepKey, Placed] = {}
    places: dict[int, str] = {}  # by scope object: a storm's members share a few (one per label set)
    for member in real:
        scope = member.scope
        place = places.get(id(scope))
        if place is None:
            place = places[id(scope)] = place_of(root.scope, scope)
        key = (member.failure_mode or "other", place)
        known = first.get(key)
        if known is None or _fired(member) < _fired(known):
            first[key] = member
    steps = [
        Step(m.layer or "unknown", key[0], key[1], (m.starts_at - start).total_seconds(), m.key)
        for key, m in first.items()
    ]
    return tuple(sorted(steps, key=lambda step: (step.at, step.alert)))


@dataclass
class History:
    """Resolved incidents' cascades, indexed by step, each with when it ended (epoch seconds):
    a prediction at a moment reads only the incidents that had ended by then."""

    cascades: list[tuple[Step, ...]] = field(default_factory=list)
    ended: list[float] = field(default_factory=list)
    by_step: dict[StepKey, list[int]] = field(default_factory=lambda: defaultdict(list))
    # What `predict` read from it for a shape of cascade (`_from_history_memo`): still true after
    # `add`, which only appends.
    memo: dict[tuple, tuple[list[int], list[Prediction]]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, items: Iterable[tuple[Sequence[Step], float]]) -> History:
        history = cls()
        for steps, ended in sorted(items, key=lambda item: item[1]):
            history.add(steps, ended)
        return history

    def add(self, steps: Sequence[Step], ended: float) -> None:
        """Add a cascade that ended at `ended`, no earlier than every one added before."""
        if self.ended and ended < self.ended[-1]:
            raise ValueError("History.add takes cascades in the order they ended")
        index = len(self.cascades)
        self.cascades.append(tuple(steps))
        self.ended.append(ended)
        for key in {step.key for step in steps}:
            self.by_step[key].append(index)

    def upto(self, moment: float | None) -> int:
        """How many cascades had ended by `moment` (all of them for None)."""
        return len(self.cascades) if moment is None else bisect.bisect_right(self.ended, moment)

    def holding(self, keys: Iterable[StepKey], upto: int) -> list[int]:
        """The cascades among the first `upto` that hold every one of `keys`, oldest first."""
        lists = sorted((self.by_step.get(key, []) for key in set(keys)), key=len)
        if not lists:
            return []
        shortest, others = lists[0], [set(indices) if len(indices) < 64 else indices for indices in lists[1:]]
        found = shortest[: bisect.bisect_left(shortest, upto)]
        for other in others:
            found = [i for i in found if _holds(other, i)]
        return found


def _holds(indices: set[int] | list[int], index: int) -> bool:
    if isinstance(indices, set):
        return index in indices
    at = bisect.bisect_left(indices, index)
    return at < len(indices) and indices[at] == index


def predict(
    steps: Sequence[Step],
    history: History,
    catalog: Catalog,
    *,
    moment: float | None = None,
    now: float | None = None,
    limit: int | None = LIMIT,
) -> tuple[list[Prediction], int]:
    """The likely next effects of an incident whose cascade so far is `steps`, best first, and
    how many past incidents were like it (below `MIN_SIMILAR`, the predictions are the rules').

    `moment` (epoch seconds) limits history to incidents ended by then; `now` (seconds after
    the incident's first alert) drops the predictions that have expired; `limit` None keeps all."""
    if not steps:
        return [], 0
    upto = history.upto(moment)
    similar, found = _from_history_memo(steps, history, upto)
    listed = {p.key for p in found}
    if len(found) < TOP:  # thin history: the rules name the rest
        found += [p for p in _from_rules(steps, history, similar, catalog) if p.key not in listed]
    if now is not None:
        found = [p for p in found if p.expires_at >= now]
    return found[:limit], len(similar)


def _from_history_memo(
    steps: Sequence[Step], history: History, upto: int
) -> tuple[list[int], list[Prediction]]:
    """`_similar` and `_from_history`, which depend only on the steps' keys, the latest one and
    `upto`: kept on the history, so that the queue's rows and its poll every few seconds ask once
    for each shape of cascade (only the time of the latest step differs, and is put back)."""
    latest = _latest(steps)
    key = (frozenset(step.key for step in steps), latest.key, upto)
    known = history.memo.get(key)
    if known is None:
        similar = _similar(steps, history, upto)
        found = _from_history(steps, history, similar) if len(similar) >= MIN_SIMILAR else []
        if len(history.memo) >= MEMO_SIZE:
            history.memo.clear()
        known = history.memo[key] = (similar, found)
    similar, found = known
    return similar, [replace(p, after_at=latest.at) for p in found]


def _similar(steps: Sequence[Step], history: History, upto: int) -> list[int]:
    """Past cascades holding every step so far, else those holding the latest step."""
    every = history.holding((step.key for step in steps), upto)
    if len(every) < MIN_SIMILAR and len(steps) > 1:
        latest = history.holding([_latest(steps).key], upto)
        every = latest if len(latest) > len(every) else every
    return every[-MAX_SIMILAR:]


def _latest(steps: Sequence[Step]) -> Step:
    return max(steps, key=lambda step: step.at)


def _from_history(steps: Sequence[Step], history: History, similar: list[int]) -> list[Prediction]:
    latest = _latest(steps)
    have = {step.key for step in steps}
    lags: dict[StepKey, list[float]] = defaultdict(list)
    layers: dict[StepKey, str] = {}
    for index in similar:
        past = history.cascades[index]
        anchor = next(step for step in past if step.key == latest.key)
        for step in past:
            if step.key not in have and step.at >= anchor.at:
                lags[step.key].append(step.at - anchor.at)
                layers.setdefault(step.key, step.layer)
    found = [
        Prediction(
            layers[key],
            key[0],
            key[1],
            *_p50_p90(values),
            len(values),
            len(similar),
            "history",
            latest.key,
            latest.at,
        )  # fmt: skip
        for key, values in lags.items()
    ]
    found.sort(key=lambda p: (-p.seen, p.lag_p50, p.key))
    return found


def _p50_p90(values: list[float]) -> tuple[float, float]:
    if len(values) == 1:
        return values[0], values[0]
    cuts = quantiles(values, n=10, method="inclusive")
    return round(median(values), 1), round(cuts[8], 1)


def _from_rules(
    steps: Sequence[Step], history: History, similar: list[int], catalog: Catalog
) -> list[Prediction]:
    """The catalog's effects of the modes seen so far, the latest cause first for each effect."""
    have = {step.key for step in steps}
    had = [{step.key for step in history.cascades[i]} for i in similar]
    best: dict[StepKey, tuple[tuple, Prediction]] = {}
    for cause in sorted(steps, key=lambda step: -step.at):
        for rule in catalog.rules:
            if rule.cause != cause.mode or rule.effect == ANY_MODE:
                continue
            layer = catalog.mode_layer(rule.effect)
            for preference, place in _effect_places(cause.place, rule.scope, layer):
                key = (rule.effect, place)
                if key in have or key in best:
                    continue
                lag = rule.max_lag.total_seconds()
                seen = sum(key in keys for keys in had)
                prediction = Prediction(layer, rule.effect, place, lag / 2, lag, seen, len(similar), "rules",
                                        cause.key, cause.at)  # fmt: skip
                best[key] = ((-seen, preference, -cause.at, -catalog.mode_depth(rule.effect)), prediction)
    return [prediction for _, prediction in sorted(best.values(), key=lambda item: item[0])]


def _effect_places(cause_place: str, relations: frozenset[str], layer: str) -> list[tuple[int, str]]:
    """The places a rule's relations put its effect in, seen from the cause's place, with a
    preference: the layer's usual place first, then the cause's own, then the others."""
    places = set()
    for relation in relations:
        if relation in _RELATION_PLACE:
            mapped = _RELATION_PLACE[relation]
            places.add(cause_place if mapped is None or cause_place in ("route", "elsewhere") else mapped)
    usual = _LAYER_PLACE.get(layer)
    return sorted((0 if place == usual else 1 if place == cause_place else 2, place) for place in places)


def predicted_since(
    before: Sequence[Step], key: StepKey, at: float, history: History, catalog: Catalog, start: float
) -> float | None:
    """Since when (seconds after the incident's start) the step `key`, come at `at`, had been among
    the top predictions without a break, from the steps `before` it (in firing order); None when
    it was not among them when it came. `start` is the incident's start in epoch seconds."""
    if not before or key not in _top_keys(before, history, catalog, start, at):
        return None
    since = before[-1].at
    for count in range(len(before) - 1, 0, -1):
        if key not in _top_keys(before[:count], history, catalog, start, before[count].at):
            break
        since = before[count - 1].at
    return since


def _top_keys(steps: Sequence[Step], history: History, catalog: Catalog, start: float, now: float) -> set:
    found, _ = predict(steps, history, catalog, moment=start + now, now=now, limit=TOP)
    return {p.key for p in found}
