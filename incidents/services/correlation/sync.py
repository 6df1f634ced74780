"""Writing a correlation run's result: incidents, their chains and root candidates, and the
alerts' incident and classification, touching only what changed so that a repeated run writes
nothing. Stored incident ids stay stable across runs (see `assign_identities`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter, is_, methodcaller, not_
from typing import Any

from django.utils import timezone

from correlate.forecast import cascade
from correlate.results import Incident as EngineIncident
from correlate.results import Member
from incidents.forecast import stored_cascade
from incidents.models import Alert, Decision, Incident, IncidentEdge, RootCandidate
from incidents.signatures import chain_signature
from incidents.sql import rows_delete, rows_insert, rows_update

SEVERITY_WORDS = {
    "critical": "critical",
    "page": "critical",
    "error": "critical",
    "high": "critical",
    "p1": "critical",
    "sev1": "critical",
    "warning": "warning",
    "warn": "warning",
    "medium": "warning",
    "p2": "warning",
    "p3": "warning",
    "info": "info",
    "low": "info",
    "none": "info",
    "p4": "info",
}
SEVERITY_ORDER = ("info", "warning", "critical")
ALERT_SYNC_FIELDS = ("incident_id", "layer", "failure_mode", "classified_by", "onset", "false_positive")


@dataclass(eq=False)
class SyncScope:
    """What a sync knows of the stored alerts besides the engine's incidents.

    A run from the window passes every row it read (`of_rows`); a run from a kept state passes
    the state's own tables, so that what a sync does per alert follows the alerts that changed,
    not the size of the incidents they joined."""

    by_key: Mapping[str, Alert]  # every row an incident of the result holds (more is fine)
    previous: Mapping[int, set[str]]  # every stored incident the result may change -> keys of all its rows
    new_rows: list[Alert]  # rows not yet correlated: written even where nothing else changed
    written: dict[str, Member] = field(
        default_factory=dict
    )  # row key -> the engine member its row was last written from
    moves: list[tuple[str, int | None, int | None]] = field(
        default_factory=list
    )  # (row key, from, to) written
    # row key -> its stored incident, as the rows stand before this sync (a row in none: absent)
    incident_of: Mapping[str, int] = field(default_factory=dict)
    _overlaps: dict[str, tuple[EngineIncident, Counter]] = field(default_factory=dict)
    _growth: dict[str, tuple[EngineIncident, list[Member] | None]] = field(default_factory=dict)
    _new: set[str] | None = None

    @classmethod
    def of_rows(cls, rows: list[Alert]) -> SyncScope:
        previous: dict[int, set[str]] = defaultdict(set)
        incident_of: dict[str, int] = {}
        for row in rows:
            if row.incident_id:
                previous[row.incident_id].add(row.key)
                incident_of[row.key] = row.incident_id
        return cls(
            {row.key: row for row in rows},
            previous,
            [row for row in rows if not row.correlated],
            incident_of=incident_of,
        )

    def rows_of(self, engine_incident: EngineIncident) -> list[Alert]:
        """The stored rows of an engine incident's members, in the engine's order."""
        return list(map(self.by_key.__getitem__, map(_KEY, engine_incident.members)))

    def overlap(self, engine_incident: EngineIncident) -> Counter:
        """How many of an engine incident's members each stored incident holds (None: in none),
        as the rows stand before this sync writes them; counted once per incident (in C: a
        storm's incident holds thousands of alerts)."""
        known = self._overlaps.get(engine_incident.id)
        if known is None or known[0] is not engine_incident:
            counts = Counter(map(self.incident_of.get, map(_KEY, engine_incident.members)))
            known = self._overlaps[engine_incident.id] = (engine_incident, counts)
        return known[1]

    def growth(self, engine_incident: EngineIncident, incident_id: int | None) -> list[Member] | None:
        """The members an engine incident adds to the stored incident `incident_id`, when it is
        that incident grown and nothing more: it holds every alert stored there, each as last
        written (the very engine member, the row correlated since), and no alert of another
        stored incident. None when it is anything else: then every member is looked at.

        A storm's runs mostly grow incidents of thousands of alerts by a few dozen: what a sync
        does for such an incident then follows the alerts it gained (in C, one pass over the
        members to tell), not its size."""
        known = self._growth.get(engine_incident.id)
        if known is not None and known[0] is engine_incident:
            return known[1]
        found = self._grown_members(engine_incident, incident_id)
        self._growth[engine_incident.id] = (engine_incident, found)
        return found

    def _grown_members(self, engine_incident: EngineIncident, incident_id: int | None) -> list[Member] | None:
        held = self.previous.get(incident_id) if incident_id else None
        if not held:
            return None
        counts = self.overlap(engine_incident)
        if counts.get(incident_id) != len(held) or any(other not in (incident_id, None) for other in counts):
            return None
        members = engine_incident.members
        keys = list(map(_KEY, members))
        inside = list(map(held.__contains__, keys))
        kept = list(compress(members, inside))
        kept_keys = list(compress(keys, inside))
        if not all(map(is_, map(self.written.get, kept_keys), kept)):
            return None  # a member changed (its alert ended, a flag): every member is looked at
        if self.new_rows and not self._new_keys().isdisjoint(kept_keys):
            return None  # a stored row came again: it must be marked correlated
        return list(compress(members, map(not_, inside)))

    def _new_keys(self) -> set[str]:
        if self._new is None:
            self._new = {row.key for row in self.new_rows}
        return self._new


_KEY = attrgetter("key")
_ALERTNAME = attrgetter("alertname")


def incidents_sync(*, key: str, scope: SyncScope, result: list[EngineIncident]) -> list[int]:
    by_key = scope.by_key
    result = sorted(result, key=lambda incident: (incident.started_at, incident.id))
    assigned = assign_identities(result, scope, key)
    stored = StoredDetails.load([assigned[incident.id].pk for incident in result if incident.ranked])
    details = DetailWrites()
    saves = IncidentSaves()
    touched: list[int] = []
    for engine_incident in result:
        incident = assigned[engine_incident.id]
        changes = grown_incident_changes(incident, engine_incident, scope)
        if changes is None:
            changes = incident_changes(incident, engine_incident, scope.rows_of(engine_incident), by_key)
        changed = saves.add(incident, changes)
        if engine_incident.ranked:  # else the stored edges and candidates stay until it is ranked
            changed = (
                details.edges(incident, engine_incident, by_key, stored.edges.get(incident.pk, [])) or changed
            )
            changed = (
                details.candidates(incident, engine_incident, by_key, stored.candidates.get(incident.pk, []))
                or changed
            )
        if changed:
            touched.append(incident.pk)
    saves.flush()
    details.flush()
    alerts_write(scope, result, assigned)
    retire_emptied(scope, assigned)
    return touched


class StoredDetails:
    """Edges and root candidates of many incidents, read in two queries, so that a run over an
    unchanged window writes nothing and reads little."""

    def __init__(self, edges: dict[int, list[tuple]], candidates: dict[int, list[tuple]]) -> None:
        self.edges = edges
        self.candidates = candidates

    @classmethod
    def load(cls, incident_ids: list[int]) -> StoredDetails:
        edges: dict[int, list[tuple]] = defaultdict(list)
        candidates: dict[int, list[tuple]] = defaultdict(list)
        for incident_id, *edge in IncidentEdge.objects.filter(incident_id__in=incident_ids).values_list(
            "incident_id", "id", "cause_id", "effect_id", "rule", "lag_seconds", "relation"
        ):
            edges[incident_id].append(tuple(edge))
        for incident_id, *candidate in RootCandidate.objects.filter(incident_id__in=incident_ids).values_list(
            "incident_id", "rank", "alert_id", "confidence", "explanation"
        ):
            candidates[incident_id].append(tuple(candidate))
        return cls(edges, candidates)


def assign_identities(result: list[EngineIncident], scope: SyncScope, key: str) -> dict[str, Incident]:
    """Keep incident ids stable across runs: each engine incident takes the stored incident it
    shares most alerts with (largest overlaps first, older incidents on ties); the rest are new.
    A part split off by a person is the new one, however big: the incident people acted on (its
    acknowledgement, owner, notes) stays with the alerts they kept in it."""
    merged_away = set(
        Incident.objects.filter(pk__in=list(scope.previous), merged_into__isnull=False).values_list(
            "pk", flat=True
        )
    )
    overlaps: list[list[Any]] = []
    for engine_incident in result:
        # Counted once per member (`SyncScope.overlap`): a storm's run holds incidents of
        # thousands of alerts, and intersecting each with every stored incident cost incidents x
        # stored set operations.
        overlaps.extend(
            [False, -shared, incident_id, engine_incident.id]
            for incident_id, shared in scope.overlap(engine_incident).items()
            if incident_id in scope.previous and incident_id not in merged_away
        )
    if len({incident_id for *_, incident_id, _ in overlaps}) < len(
        overlaps
    ):  # a stored incident now in parts
        split_off = split_off_parts(result, key)
        for overlap in overlaps:
            overlap[0] = overlap[3] in split_off
    overlaps.sort()
    taken: dict[str, int] = {}
    used: set[int] = set()
    for _, _, incident_id, engine_id in overlaps:
        if engine_id not in taken and incident_id not in used:
            taken[engine_id] = incident_id
            used.add(incident_id)
    existing = Incident.objects.in_bulk(list(used))
    assigned = {}
    for engine_incident in result:
        if engine_incident.id in taken:
            assigned[engine_incident.id] = existing[taken[engine_incident.id]]
        else:
            assigned[engine_incident.id] = Incident(
                correlation_key=key, started_at=engine_incident.started_at
            )
    # One INSERT for the run's new incidents (a storm's first runs open hundreds), in the
    # engine's order, so their ids follow it as one by one they did.
    Incident.objects.bulk_create([incident for incident in assigned.values() if incident.pk is None])
    return assigned


def split_off_parts(result: list[EngineIncident], key: str) -> set[str]:
    """Engine incidents made only of alerts a person's split named."""
    named: set[str] = set()
    for alert_keys in Decision.objects.filter(correlation_key=key, kind=Decision.Kind.SPLIT).values_list(
        "alert_keys", flat=True
    ):
        named.update(alert_keys)
    if not named:
        return set()
    return {incident.id for incident in result if all(member.key in named for member in incident.members)}


def incident_changes(
    incident: Incident, engine_incident: EngineIncident, members: list[Alert], by_key: Mapping[str, Alert]
) -> list[str]:
    """Set on `incident` what the engine's answer changes; returns the names of the fields changed."""
    values = {
        "started_at": engine_incident.started_at,  # its earliest member's start
        "last_alert_at": max(map(_STARTS_AT, members)),
        "ranking_held": not engine_incident.ranked,  # its details wait for the ranking (KeyState.rank_now)
    }
    if engine_incident.ranked or not incident.title:
        values.update(incident_details(engine_incident, members[0], by_key))
    if not incident.severity_by_human:
        values["severity"] = severity_of(members)
    values.update(status_from_alerts(incident, members))
    return values_set(incident, values)


def values_set(incident: Incident, values: dict) -> list[str]:
    """Set on `incident` the values that differ from its own; returns their field names."""
    changed = [name for name, value in values.items() if getattr(incident, name) != value]
    for name in changed:
        setattr(incident, name, values[name])
    return changed


def grown_incident_changes(
    incident: Incident, engine_incident: EngineIncident, scope: SyncScope
) -> list[str] | None:
    """`incident_changes` for an incident the engine only grew (`SyncScope.growth`), from the
    stored values and the alerts it gained: what it stored was computed from its alerts then (the
    latest start, the highest severity, firing or not), and these only add to that; its ranking's
    details, when ranked, as `incident_changes` gives them. None when it did not only grow: then
    `incident_changes` it is."""
    if incident.pk is None:
        return None
    grown = scope.growth(engine_incident, incident.pk)
    if grown is None:
        return None
    rows = list(map(scope.by_key.__getitem__, map(_KEY, grown)))
    values = {"started_at": engine_incident.started_at, "ranking_held": not engine_incident.ranked}
    if engine_incident.ranked or not incident.title:
        values.update(
            incident_details(engine_incident, scope.by_key[engine_incident.members[0].key], scope.by_key)
        )
    if rows:
        latest = max(map(_STARTS_AT, rows))
        values["last_alert_at"] = max(latest, incident.last_alert_at) if incident.last_alert_at else latest
        if not incident.severity_by_human:
            values["severity"] = max(incident.severity, severity_of(rows), key=_severity_rank)
    if incident.resolved_at is not None and not (incident.resolved_by_human or incident.reopened_by_human):
        # Firing, it stays so; resolved, an alert that fires reopens it, and resolved alerts
        # alone move when it ended: recomputed from every alert.
        if Alert.Status.FIRING not in set(map(_STATUS, rows)):
            return None
        values.update(status_from_alerts(incident, rows))
    return values_set(incident, values)


def _severity_rank(level: str) -> int:
    return SEVERITY_ORDER.index(level) if level in SEVERITY_ORDER else SEVERITY_ORDER.index("warning")


class IncidentSaves:
    """The incidents a run changed, written at the end in one UPDATE per set of changed fields
    (a storm's run changes a few incidents the same way: their members, times and status)
    instead of one `save()` each."""

    def __init__(self) -> None:
        self.by_fields: dict[tuple[str, ...], list[Incident]] = defaultdict(list)

    def add(self, incident: Incident, changed: list[str]) -> bool:
        if changed:
            self.by_fields[tuple(sorted(changed))].append(incident)
        return bool(changed)

    def flush(self) -> None:
        now = timezone.now()
        for fields, incidents in self.by_fields.items():
            for incident in incidents:
                incident.updated_at = now
            rows_update(Incident, incidents, [*fields, "updated_at"])


def incident_details(engine_incident: EngineIncident, first: Alert, by_key: Mapping[str, Alert]) -> dict:
    """What ranking and the members' places give an incident: scope, layers, root, chain, title."""
    root = engine_incident.root
    root_row = by_key.get(root.alert_key) if root else None
    scope = engine_incident.scope  # computed from every member on each access: once here
    return {
        "scope": scope,
        "layers": list(engine_incident.layers),
        "failure_modes": list(engine_incident.failure_modes),
        "root_alert_id": root_row.pk if root_row else None,
        "root_confidence": round(root.confidence, 4) if root else None,
        "root_explanation": root.explanation if root else "",
        "chain": [by_key[k].pk for k in engine_incident.chain if k in by_key],
        "chain_signature": chain_signature(_chain_steps(engine_incident)),
        "cascade": stored_cascade(
            cascade(engine_incident.members, root.alert_key if root else None),
            by_key,
        ),
        "title": incident_title(engine_incident, scope, root_row, first),
    }


def _chain_steps(engine_incident: EngineIncident) -> list[tuple[str, str]]:
    """Each chain step's (layer, failure_mode), cause before effect."""
    pairs = {member.key: (member.layer, member.failure_mode) for member in engine_incident.members}
    return [pairs[key] for key in engine_incident.chain if key in pairs]


def incident_title(
    engine_incident: EngineIncident, scope: dict[str, str], root_row: Alert | None, first: Alert
) -> str:
    lead = root_row or first
    where = (
        scope.get("deployment")
        or scope.get("model")
        or scope.get("pod")
        or scope.get("node")
        or scope.get("namespace")
        or scope.get("cluster", "")
    )
    alertnames = dict(
        zip(map(_KEY, engine_incident.members), map(_ALERTNAME, engine_incident.members), strict=True)
    )
    names: list[str] = []
    for key in engine_incident.chain:
        name = alertnames.get(key)
        if name and name not in names:
            names.append(name)
    headline = " → ".join(names[:3]) if len(names) > 1 else (lead.alertname or "alert")
    if len(names) > 3:
        headline += f" → … ({len(names) - 3} more)"
    return (f"{headline} on {where}" if where else headline)[:500]


_STARTS_AT = attrgetter("starts_at")
_ENDS_AT = attrgetter("ends_at")
_STATUS = attrgetter("status")
_LABELS = attrgetter("labels")
_SEVERITY_LABEL = methodcaller("get", "severity", "")


def severity_of(members: list[Alert]) -> str:
    """The highest of the members' severities, each label value read once (a storm's incident
    holds thousands of alerts with a handful of values, and every run of its key passes them all)."""
    values = set(map(_SEVERITY_LABEL, map(_LABELS, members)))
    levels = {SEVERITY_WORDS.get(str(value).strip().lower(), "warning") for value in values}
    return max(levels, key=SEVERITY_ORDER.index) if levels else "warning"


def status_from_alerts(incident: Incident, members: list[Alert]) -> dict:
    """Alerts resolve an incident when they all have ended, and reopen it when one fires again,
    unless a person resolved or reopened it: then people decide."""
    if incident.resolved_by_human or incident.reopened_by_human:
        return {}
    firing = Alert.Status.FIRING in set(map(_STATUS, members))
    resolved_at = None
    if not firing:
        ends = [end for end in map(_ENDS_AT, members) if end]
        resolved_at = max(ends) if ends else max(map(_STARTS_AT, members))
    if resolved_at == incident.resolved_at:
        return {}
    previous, incident.resolved_at = incident.resolved_at, resolved_at
    status = incident.derived_status()
    incident.resolved_at = previous
    return {"resolved_at": resolved_at, "status": status}


class DetailWrites:
    """Edges and root candidates of every incident of a run, compared with what is stored and
    written at the end in one delete and one insert of each kind."""

    def __init__(self) -> None:
        self.edges_gone: list[int] = []
        self.edges_new: list[IncidentEdge] = []
        self.candidates_of: list[int] = []
        self.candidates_new: list[RootCandidate] = []

    def edges(
        self,
        incident: Incident,
        engine_incident: EngineIncident,
        by_key: Mapping[str, Alert],
        stored: list[tuple],
    ) -> bool:
        """Drop the stored edges the engine no longer gives and add the new ones (`stored` rows
        are `(id, cause, effect, rule, lag, relation)`): a growing incident keeps its old edges
        rather than rewriting them all on every run."""
        wanted = {
            (by_key[e.cause].pk, by_key[e.effect].pk, e.rule, round(e.lag_seconds, 3), e.relation)
            for e in engine_incident.edges
            if e.cause in by_key and e.effect in by_key
        }
        kept: set[tuple] = set()
        gone = []
        for edge_id, *columns in stored:
            edge = tuple(columns)
            if edge in wanted and edge not in kept:
                kept.add(edge)
            else:
                gone.append(edge_id)
        new = sorted(wanted - kept)
        self.edges_gone.extend(gone)
        self.edges_new.extend(
            IncidentEdge(
                incident=incident, cause_id=c, effect_id=e, rule=rule, lag_seconds=lag, relation=relation
            )
            for c, e, rule, lag, relation in new
        )
        return bool(gone or new)

    def candidates(
        self,
        incident: Incident,
        engine_incident: EngineIncident,
        by_key: Mapping[str, Alert],
        stored: list[tuple],
    ) -> bool:
        wanted = [
            (rank, by_key[c.alert_key].pk, round(c.confidence, 4), c.explanation)
            for rank, c in enumerate(engine_incident.root_candidates)
            if c.alert_key in by_key
        ]
        if sorted(stored) == wanted:
            return False
        self.candidates_of.append(incident.pk)
        self.candidates_new.extend(
            RootCandidate(
                incident=incident,
                rank=rank,
                alert_id=alert_id,
                confidence=confidence,
                explanation=explanation,
            )
            for rank, alert_id, confidence, explanation in wanted
        )
        return True

    def flush(self) -> None:
        rows_delete(IncidentEdge, "id", self.edges_gone)
        rows_insert(IncidentEdge, self.edges_new)
        rows_delete(RootCandidate, "incident_id", self.candidates_of)
        rows_insert(RootCandidate, self.candidates_new)


def alerts_write(scope: SyncScope, result: list[EngineIncident], assigned: dict[str, Incident]) -> None:
    """Write only the alerts whose incident or classification changed. A row last written from
    the very member object the engine gives again (the engine keeps a member until its alert
    changes), in the same incident, is unchanged and skipped at the cost of two comparisons: a
    storm's incidents hold thousands of rows, and every run of their key passes them all."""
    by_key, written = scope.by_key, scope.written
    changed: list[Alert] = []
    for engine_incident in result:
        incident_id = assigned[engine_incident.id].id
        grown = scope.growth(engine_incident, incident_id)  # known since its changes were set
        for member in engine_incident.members if grown is None else grown:
            row = by_key[member.key]
            if written.get(member.key) is member and row.incident_id == incident_id and row.correlated:
                continue
            written[member.key] = member
            alert_write(
                scope,
                row,
                (
                    incident_id,
                    member.layer,
                    member.failure_mode,
                    member.classified_by,
                    member.onset,
                    member.false_positive,
                ),
                changed,
            )
    for row in rows_in_no_incident(scope, result):
        written.pop(row.key, None)
        alert_write(
            scope,
            row,
            (None, row.layer, row.failure_mode, row.classified_by, row.onset, row.false_positive),
            changed,
        )
    rows_update(Alert, changed, [*ALERT_SYNC_FIELDS, "correlated"])


def alert_write(scope: SyncScope, row: Alert, wanted: tuple, changed: list[Alert]) -> None:
    """Set `wanted` (the values of ALERT_SYNC_FIELDS) on `row`, marked correlated, and add it to
    `changed` unless it already held all that."""
    stored = (row.incident_id, row.layer, row.failure_mode, row.classified_by, row.onset, row.false_positive)
    if row.correlated and wanted == stored:
        return
    if wanted[0] != row.incident_id:
        scope.moves.append((row.key, row.incident_id, wanted[0]))
    row.incident_id, row.layer, row.failure_mode, row.classified_by, row.onset, row.false_positive = wanted
    row.correlated = True
    changed.append(row)


def rows_in_no_incident(scope: SyncScope, result: list[EngineIncident]) -> list[Alert]:
    """Rows of the scope that no incident of the result holds: a stored incident's rows that
    its engine incidents no longer hold (excluded, or a part the engine gave up), and new rows
    in no incident. Called after the members are written: a new row the result holds is no
    longer uncorrelated, and a stored incident whose overlaps add up to its size (the usual
    case: it only grew) has no such row, found without a pass over its rows."""
    left = [row for row in scope.new_rows if not row.correlated and not row.incident_id]
    held_in: Counter = Counter()
    for engine_incident in result:
        held_in.update(scope.overlap(engine_incident))
    short = [incident_id for incident_id, keys in scope.previous.items() if held_in[incident_id] < len(keys)]
    if short:
        in_result = {member.key for engine_incident in result for member in engine_incident.members}
        for incident_id in short:
            left.extend(
                scope.by_key[key] for key in sorted(scope.previous[incident_id]) if key not in in_result
            )
    return left


def retire_emptied(scope: SyncScope, assigned: dict[str, Incident]) -> None:
    """A stored incident left without alerts was folded into another by the engine (an alert
    linked them) or emptied by a decision: one with human actions or a postmortem is kept, marked as
    merged into the incident that took most of its alerts (on ties, that of its first stored alert); one
    nobody touched is deleted."""
    live = {incident.pk for incident in assigned.values()}
    for incident_id, keys in scope.previous.items():
        if incident_id in live:
            continue
        rows = sorted((scope.by_key[key] for key in keys), key=lambda row: row.pk)
        successors = Counter(row.incident_id for row in rows if row.incident_id)
        incident = Incident.objects.filter(pk=incident_id).first()
        if incident is None:
            continue
        if incident.actions.exists() or incident.merged_into_id or incident.postmortems.exists():
            target = successors.most_common(1)[0][0] if successors else None
            if target and target != incident.pk and incident.merged_into_id != target:
                incident.merged_into_id = target
                incident.save(update_fields=["merged_into", "updated_at"])
        else:
            Incident.objects.filter(pk=incident_id).delete()
