"""What a process keeps of a correlation key between runs, so that a run feeds the engine only the
alerts that are new and writes only the incidents they change.

A key's state is the engine's `Correlator` after the last run in this process, the alert rows it
holds and which stored incident each belongs to. It is used again only when nothing else can have
changed the key since: the key's `CorrelationLock.run_token` is still the one this process wrote
(no run in another process or a transaction that rolled back), the key's human decisions are the
same, the catalog is the same object, and no new alert starts so early that it could link to an
alert older than the state's window. Otherwise the run rebuilds the state from the database
window, as every run did before states were kept; both paths give the same incidents
(tests/incidents/test_correlation_state.py).

A state is taken out of the process-wide table for the length of a run and put back only after
the run's transaction has committed, so an error, a rollback or two threads on one key can never
leave a state that disagrees with the database.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter
from time import monotonic

from django.conf import settings

from correlate.catalog import Catalog
from correlate.engine import Correlator
from correlate.results import Incident as EngineIncident
from correlate.results import Member
from incidents.models import Alert
from incidents.services.correlation.sync import SyncScope

_KEY = attrgetter("key")
MAX_KEPT_KEYS = 256
# An incident this big is ranked (edges, chain, root candidates) at most every RANK_EVERY_SECONDS
# by a worker's runs; its members are written on every run. In bench/ingest's storm one incident
# grows to 10,000 alerts, and ranking it after every few alerts cost more CPU than the rest of
# the run (bench/correlate/peer_storm.py).
BIG_INCIDENT = 500
RANK_EVERY_SECONDS = settings.CORRELATION_RANK_EVERY_SECONDS  # ROOTLINE_CORRELATION_RANK_EVERY_MS, 5 s
# Alerts held by all of a process's states together (each costs memory with its engine entry,
# about 9 KB: bench/correlate/kept_memory.py): past this, the least recently used states are
# dropped and their keys rebuild from the window. ROOTLINE_CORRELATION_KEPT_ALERTS, by default a
# share of the machine's memory (rootline/settings.py); a shard whose clusters hold more rebuilds
# on every run (docs/benchmarks.md, "Known limits").
MAX_KEPT_ALERTS = settings.CORRELATION_KEPT_ALERTS


@dataclass(eq=False)
class KeyState:
    correlator: Correlator
    catalog: Catalog
    since: datetime  # the correlator holds every alert of the key from here on (and whole incidents)
    decisions: tuple[int, ...]
    rows: dict[str, Alert]  # by occurrence key: every alert the correlator holds
    members: dict[int, set[str]] = field(
        default_factory=lambda: defaultdict(set)
    )  # stored incident -> alert keys
    incident_of: dict[str, int] = field(
        default_factory=dict
    )  # alert key -> its stored incident (`members` reversed)
    written: dict[str, Member] = field(
        default_factory=dict
    )  # alert key -> the engine member its row was last written from
    token: str = ""
    ranked_at: dict[str, float] = field(
        default_factory=dict
    )  # engine incident id -> when last ranked (monotonic)
    unranked: set[str] = field(default_factory=set)  # engine incident ids whose ranking was held back

    @classmethod
    def from_window(
        cls,
        correlator: Correlator,
        catalog: Catalog,
        since: datetime,
        decisions: tuple[int, ...],
        rows: list[Alert],
        written: dict[str, Member],
    ) -> KeyState:
        state = cls(correlator, catalog, since, decisions, {row.key: row for row in rows}, written=written)
        for row in rows:
            if row.incident_id:
                state.members[row.incident_id].add(row.key)
                state.incident_of[row.key] = row.incident_id
        return state

    def can_take(self, earliest_new: datetime, span: timedelta) -> bool:
        """New alerts can link only `span` back; the state must reach that far, and is rebuilt
        once it reaches more than one span further (so a long-lived state sheds old alerts)."""
        reach = earliest_new - span
        return self.since <= reach <= self.since + span

    def relabelled(self, fresh: list[Alert]) -> bool:
        """Whether an alert the state holds came back with other labels (an Events API trigger
        updates a firing occurrence): the engine takes a known alert's end, not new labels."""
        for row in fresh:
            held = self.rows.get(row.key)
            if held is not None and held.labels != row.labels:
                return True
        return False

    def add(
        self, fresh: list[Alert], engine_alerts: list, *, hold_big_rankings: bool
    ) -> list[EngineIncident]:
        """The incidents the new alerts changed, and those whose held-back ranking is due. With
        `hold_big_rankings`, big incidents are ranked at most every RANK_EVERY_SECONDS."""
        for row in fresh:
            self.rows[row.key] = row
        rank_if = self.rank_now if hold_big_rankings else None
        changed = self.correlator.add_many(engine_alerts, rank_if=rank_if) if engine_alerts else []
        due = self.rankings_due()
        if not due:
            return changed
        ranked = {incident.id for incident in due}
        return [incident for incident in changed if incident.id not in ranked] + due

    def note_ranked(self, incident_ids: Iterable[str], now: float | None = None) -> None:
        """These incidents were ranked just now (by the window run that built this state)."""
        now = monotonic() if now is None else now
        self.ranked_at.update(dict.fromkeys(incident_ids, now))

    def rank_now(self, incident_id: str, size: int, now: float | None = None) -> bool:
        """Whether a changed incident is ranked in this run: always when small or not ranked
        here before (its first ranking is never held back), else once RANK_EVERY_SECONDS passed."""
        now = monotonic() if now is None else now
        if (
            size >= BIG_INCIDENT
            and now - self.ranked_at.get(incident_id, -RANK_EVERY_SECONDS) < RANK_EVERY_SECONDS
        ):
            self.unranked.add(incident_id)
            return False
        self.ranked_at[incident_id] = now
        self.unranked.discard(incident_id)
        return True

    def rankings_due(self, now: float | None = None) -> list[EngineIncident]:
        """Held-back incidents whose ranking is due, ranked. An id names the incident's earliest
        alert, so one that was merged or grew an earlier alert is found through that alert."""
        now = monotonic() if now is None else now
        due = [
            incident_id
            for incident_id in self.unranked
            if now - self.ranked_at[incident_id] >= RANK_EVERY_SECONDS
        ]
        ranked: dict[str, EngineIncident] = {}
        for incident_id in sorted(due):
            self.unranked.discard(incident_id)
            incident = self.correlator.incident_of(incident_id)
            if incident is not None and incident.id not in ranked:
                self.ranked_at[incident.id] = now
                self.unranked.discard(incident.id)
                ranked[incident.id] = incident
        return list(ranked.values())

    def ranking_due(self) -> bool:
        """Whether a held-back ranking is due now (a run with no new alert then still runs)."""
        wait = self.next_ranking_in()
        return wait is not None and wait <= 0

    def next_ranking_in(self, now: float | None = None) -> float | None:
        """Seconds until the first held-back ranking is due; None when none is held back."""
        if not self.unranked:
            return None
        now = monotonic() if now is None else now
        first = min(
            self.ranked_at[incident_id] for incident_id in self.unranked
        )  # a held one was ranked before
        return max(0.0, first + RANK_EVERY_SECONDS - now)

    def affected(
        self, changed: list[EngineIncident], fresh: list[Alert]
    ) -> tuple[list[EngineIncident], SyncScope]:
        """The incidents a sync must write, and what it must know of the stored rows, so that
        writing them alone is the same as writing the whole window: every stored incident any of
        them (or a new row) belongs to comes in whole, and with it the engine incident of each of
        its alerts, and of each new row (an incident the engine split or emptied, or the
        unchanged incident of a known alert that came again).

        A stored incident whose alerts the incidents already hold all of (the usual case: it only
        grew) is known so from the counts of `SyncScope.overlap`, without a pass over its rows."""
        scope = SyncScope(self.rows, {}, fresh, self.written, incident_of=self.incident_of)
        incidents: dict[str, EngineIncident] = {}
        in_result: set[str] = set()
        held_in: Counter = Counter()  # stored incident -> how many of its alerts the incidents hold
        stored = {row.incident_id for row in fresh if row.incident_id}
        expanded: set[int] = set()
        pending = list(changed)
        outside = [row.key for row in fresh]
        while pending or outside:
            for incident in pending:
                if incident.id not in incidents:
                    incidents[incident.id] = incident
                    in_result.update(map(_KEY, incident.members))
                    counts = scope.overlap(incident)
                    held_in.update(counts)
                    stored.update(incident_id for incident_id in counts if incident_id)
            for incident_id in sorted(stored - expanded):
                if held_in[incident_id] < len(self.members.get(incident_id, ())):
                    expanded.add(incident_id)
                    outside.extend(sorted(self.members[incident_id] - in_result))
            pending = []
            for key in outside:
                if key not in in_result:
                    holder = self.correlator.incident_of(key)
                    if holder is not None and holder.id not in incidents:
                        pending.append(holder)
            outside = []
        scope.previous = {
            incident_id: self.members[incident_id]
            for incident_id in sorted(stored)
            if incident_id in self.members
        }
        return list(incidents.values()), scope

    def note_moves(self, moves: list[tuple[str, int | None, int | None]]) -> None:
        """Follow the rows a sync moved from one stored incident to another."""
        for key, old, new in moves:
            if old:
                keys = self.members.get(old)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self.members[old]
                self.incident_of.pop(key, None)
            if new:
                self.members[new].add(key)
                self.incident_of[key] = new


class KeptStates:
    """The process's states, at most `limit` keys and `alert_limit` alerts held in all, least
    recently used dropped first (the state just kept always stays)."""

    def __init__(self, limit: int = MAX_KEPT_KEYS, alert_limit: int = MAX_KEPT_ALERTS) -> None:
        self.limit = limit
        self.alert_limit = alert_limit
        self._states: OrderedDict[str, KeyState] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str) -> KeyState | None:
        with self._lock:
            return self._states.pop(key, None)

    def keep(self, key: str, state: KeyState) -> int:
        """Keep `state` for `key`; returns how many other states were dropped to make room."""
        dropped_count = 0
        with self._lock:
            self._states[key] = state
            self._states.move_to_end(key)
            held = sum(len(kept.rows) for kept in self._states.values())
            while len(self._states) > 1 and (len(self._states) > self.limit or held > self.alert_limit):
                _, dropped = self._states.popitem(last=False)
                held -= len(dropped.rows)
                dropped_count += 1
        return dropped_count

    def clear(self) -> None:
        with self._lock:
            self._states.clear()

    def __len__(self) -> int:
        return len(self._states)


KEPT = KeptStates()
