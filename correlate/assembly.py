"""Incident assembly: the groups of a cluster's forest cut and joined by human decisions, each
built into an `Incident` with its members, edges, chain and ranked root candidates.
`Correlator` inherits it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from correlate.entries import (
    _Entry,
    _made_edge,
    _sort_key,
)
from correlate.events import RESOLVED
from correlate.ranking import numbered_edges, rank_numbered
from correlate.results import (
    Decision,
    Incident,
    Member,
    Merge,
    Split,
)
from correlate.timing import as_utc

if TYPE_CHECKING:
    from correlate.catalog import Catalog
    from correlate.partition import _Partition


class _Assembly:
    """The assembly half of `Correlator`, which sets the state below in its __init__."""

    catalog: Catalog
    _partitions: dict[str, _Partition]
    _entries: dict[str, _Entry]
    _decisions: list[Decision]
    _excluded: set[str]
    _false_positive: set[str]

    @property
    def excluded_keys(self) -> frozenset[str]:
        return frozenset(self._excluded)

    def incidents(self) -> list[Incident]:
        if not any(isinstance(d, (Merge, Split)) for d in self._decisions):
            # No human regrouping: the incidents are the union-find's groups as they stand.
            groups = []
            for partition in self._partitions.values():
                parent = partition.parent
                for root, agg in partition.agg.items():
                    if parent[root] == root:
                        groups.append(sorted(agg[4], key=_sort_key))
            built = [self._build(members) for members in groups]
            built.sort(key=lambda inc: (inc.started_at, inc.id))
            return built
        every = [e for p in self._partitions.values() for e in p.entries if not e.excluded]
        return self._incidents_touching(every)

    def incident_of(self, alert_key: str) -> Incident | None:
        entry = self._entries.get(alert_key)
        if entry is None or entry.excluded:
            return None
        found = self._incidents_touching([entry])
        return found[0] if found else None

    def _incidents_touching(
        self, entries: Sequence[_Entry], rank_if: Callable[[str, int], bool] | None = None
    ) -> list[Incident]:
        if any(isinstance(d, (Merge, Split)) for d in self._decisions):
            groups = self._final_groups(entries)
        else:
            groups = self._automatic_groups(entries)
        # A group's id is its earliest member's key (see _build); groups come sorted.
        built = [
            self._build(members)
            if rank_if is None or rank_if(members[0].key, len(members))
            else self._build_unranked(members)
            for members in groups
        ]
        built.sort(key=lambda inc: (inc.started_at, inc.id))
        return built

    def _automatic_groups(self, entries: Sequence[_Entry]) -> list[list[_Entry]]:
        """_final_groups() with no human regrouping: the union-find groups holding `entries`."""
        groups: dict[tuple[str, str], list[_Entry]] = {}
        for entry in entries:
            partition = self._partitions[entry.partition]
            if not entry.excluded and entry.key in partition.parent:
                root = partition.find(entry.key)
                if (entry.partition, root) not in groups:
                    groups[(entry.partition, root)] = sorted(partition.members(root), key=_sort_key)
        return list(groups.values())

    def _final_groups(self, entries: Sequence[_Entry]) -> list[list[_Entry]]:
        """Automatic groups with human merges and splits laid over them (decision order kept)."""
        pins: dict[str, int] = {}
        merges: list[tuple[int, tuple[str, ...]]] = []
        for number, decision in enumerate(self._decisions):
            if isinstance(decision, Split):
                for key in decision.alert_keys:
                    pins[key] = number
            elif isinstance(decision, Merge):
                merges.append((number, decision.alert_keys))

        def group_of(entry: _Entry) -> tuple:
            if entry.key in pins:
                return ("split", pins[entry.key])
            partition = self._partitions[entry.partition]
            return ("auto", entry.partition, partition.find(entry.key))

        union: dict[tuple, tuple] = {}

        def find(g: tuple) -> tuple:
            while union.get(g, g) != g:
                g = union[g]
            return g

        for number, keys in merges:
            # A key split off after this merge left it: the later decision wins for that key.
            live = [
                self._entries[k]
                for k in keys
                if k in self._entries and not self._entries[k].excluded and pins.get(k, -1) < number
            ]
            gids = sorted({find(group_of(e)) for e in live})
            for other in gids[1:]:
                union[find(other)] = find(gids[0])
        wanted: dict[tuple, None] = {}
        for entry in entries:
            if not entry.excluded and entry.key in self._entries:
                wanted.setdefault(find(group_of(entry)), None)
        if not wanted:
            return []
        components: dict[tuple, list[tuple]] = {final: [] for final in wanted}
        for gid in set(union) | set(union.values()) | set(wanted):
            final = find(gid)
            if final in components:
                components[final].append(gid)
        groups: list[list[_Entry]] = []
        for final, gids in components.items():
            members: dict[str, _Entry] = {}
            for gid in set(gids) | {final}:
                for entry in self._group_members(gid, pins):
                    members[entry.key] = entry
            if members:
                groups.append(sorted(members.values(), key=_sort_key))
        return groups

    def _group_members(self, gid: tuple, pins: dict[str, int]) -> list[_Entry]:
        if gid[0] == "split":
            return [
                self._entries[k]
                for k, n in pins.items()
                if n == gid[1] and k in self._entries and not self._entries[k].excluded
            ]
        partition = self._partitions[gid[1]]
        if gid[2] not in partition.agg:
            return []
        return [e for e in partition.members(gid[2]) if e.key not in pins]

    def _build(self, entries: list[_Entry]) -> Incident:
        inside = set(entries)
        for number, entry in enumerate(entries):
            entry.number = number  # members are numbered by position for ranking
        members = self._members(entries)
        # Each pair is recorded once, on the later alert of the two (a scan compares a neighbour
        # once), so an entry's records need only the other end checked against the incident.
        records: list[list] = []
        links: list[tuple[int, int]] = []
        for entry in entries:
            if entry.edges:
                for record in entry.edges:
                    if (record[1] if record[0] is entry else record[0]) in inside:
                        records.append(record)
            if entry.links:
                number = entry.number
                links.extend([(number, other.number) for other in entry.links if other in inside])
        graph = numbered_edges(
            [record[0].number for record in records],
            [record[1].number for record in records],
            [record[3] for record in records],
            lambda n: records[n][5] or _made_edge(records[n]),
        )
        ranked = rank_numbered(members, graph, links, self.catalog)
        return Incident(
            id=entries[0].key,
            members=tuple(members),
            edges=ranked.edges,
            chain=ranked.chain,
            root_candidates=ranked.candidates,
            started_at=min([m.starts_at for m in members]),  # Member.starts_at is as_utc(alert.starts_at)
            ended_at=_ended_at(members),
        )

    def _build_unranked(self, entries: list[_Entry]) -> Incident:
        """_build() without the ranking: the members, when the incident started and ended."""
        members = self._members(entries)
        return Incident(
            id=entries[0].key,
            members=tuple(members),
            edges=(),
            chain=(),
            root_candidates=(),
            started_at=min([m.starts_at for m in members]),
            ended_at=_ended_at(members),
            ranked=False,
        )

    def _members(self, entries: list[_Entry]) -> list[Member]:
        """_member() of each, its cache read inline (big incidents are rebuilt on every update)."""
        if self._false_positive:
            return [self._member(e) for e in entries]
        # No alert is flagged, so no cached member is either: it holds while its end is the same.
        return [
            e.member if e.member is not None and e.member_end == e.end_t else self._member(e) for e in entries
        ]

    def _member(self, entry: _Entry) -> Member:
        """Members are rebuilt for every changed incident, so each is cached until its alert changes."""
        flagged = entry.key in self._false_positive
        cached = entry.member
        if cached is not None and cached.false_positive == flagged and entry.member_end == entry.end_t:
            return cached
        entry.member = self._new_member(entry, flagged)
        entry.member_end = entry.end_t
        return entry.member

    def _new_member(self, entry: _Entry, flagged: bool) -> Member:
        alert = entry.alert
        cls = entry.cls
        # A frozen dataclass's __init__ sets each field through object.__setattr__, which is the
        # cost here; filling the instance dict directly (fields in declaration order) gives an
        # equal object without it.
        member = object.__new__(Member)
        member.__dict__.update(
            key=entry.key,
            fingerprint=alert.fingerprint,
            alertname=alert.labels.get("alertname", ""),
            starts_at=entry.starts_at,
            onset=entry.onset,
            ends_at=_end_datetime(entry),
            layer=cls.layer,
            failure_mode=cls.failure_mode,
            classified_by=cls.source,
            scope=entry.scope,
            false_positive=flagged,
            depth=cls.depth,
        )
        return member


def _ended_at(members: list[Member]) -> datetime | None:
    """When an incident ended: its last member's end, once every member has ended."""
    ends = [m.ends_at for m in members]
    return max(ends) if ends and all(e is not None for e in ends) else None  # type: ignore[type-var]


def _end_datetime(entry: _Entry) -> datetime | None:
    if entry.end_t is None:
        return None
    alert = entry.alert
    if alert.ends_at is not None and alert.status == RESOLVED:
        return as_utc(alert.ends_at)
    return datetime.fromtimestamp(entry.end_t, tz=UTC)


def _decision_keys(decision: Decision) -> tuple[str, ...]:
    if isinstance(decision, (Merge, Split)):
        return decision.alert_keys
    return (decision.alert_key,)
