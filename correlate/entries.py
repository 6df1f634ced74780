"""What a cluster's partition holds of each alert (`_Entry`), a workload bucket's per-mode runs
(`_ModeList`), what one scan keeps of its neighbours' components (`_Kept`), and the constants
the scan, the replay and the linking rules share."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from operator import attrgetter
from typing import TYPE_CHECKING

from correlate.classify import Classification
from correlate.events import RESOLVED, Alert, is_zero_time
from correlate.results import (
    Edge,
    Member,
)
from correlate.scope import (
    Scope,
    gateway_key,
)
from correlate.timing import MAX_LOOKBACK, as_utc

if TYPE_CHECKING:
    from correlate.partition import _Partition

_TIGHT = frozenset({"same_pod", "same_gpu"})
_RELATION_ORDER = (
    "same_pod",
    "same_gpu",
    "same_node",
    "same_group",
    "same_deployment",
    "sibling",
    "same_model",
    "gateway",
    "unplaced",
    "same_namespace",
    "in_change_scope",
    "same_cluster",
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MODE_IDS: dict[str, int] = {}  # failure mode -> small number, to look pair gaps up in a list
_WIDE_KEYS = frozenset({"gw", "dep", "model"})  # buckets of a workload or model, not of one place
# Relations the pod/node/GPU buckets find (a pod group's alerts are all in its leader's pod bucket).
_LOCAL = frozenset({"same_pod", "same_gpu", "same_node", "co_located", "same_group"})
_NOWHERE: frozenset[str] = frozenset()
# A node/GPU-level alert and a pod placed nowhere: found through the cluster's fault bucket only
# (a fault of a mode some `unplaced` rule starts from; pods placed nowhere read it), never by the
# workload buckets, and only forwards (the effect's onset at or after the fault's).
_UNPLACED = frozenset({"unplaced"})
_FAULTS = ("unplaced", "faults")
_MAX_LOOKBACK_SECONDS = MAX_LOOKBACK.total_seconds()  # the furthest an alert is placed before it fired


_FORWARD, _BACKWARD, _LINK = 1, 2, 4
_DENSE = 32  # a workload/model bucket with this many alerts in a scan's horizon is read per mode
_UNKEPT = 8  # an edge into an alert with no kept incoming edge: never marked, so always compared


class _Entry:
    """One alert occurrence as a cluster holds it: prepared once, then linked, indexed and undone.

    A plain slotted class with a positional constructor: one is made per alert, and a dataclass's
    generated keyword __init__ costs more for the same object, which adds up over a batch.
    """

    __slots__ = (
        "alert",
        "key",
        "cls",
        "scope",
        "t",
        "end_t",
        "partition",
        "starts_at",
        "onset",
        "change_kind",
        "excluded",
        "nodes",
        "gpus",
        "placement",
        "member",
        "member_end",
        "index_keys",
        "edges",
        "links",
        "undo",
        "sort_key",
        "mode",
        "stamp",
        "own_keys",
        "own_scan",
        "mode_id",
        "kin",
        "kin_size",
        "incoming",
        "number",
        "scan_keys",
        "scan_version",
        "unplaced",
    )

    def __init__(
        self,
        alert: Alert,
        key: str,
        cls: Classification,
        scope: Scope,
        t: float,
        end_t: float | None,
        partition: str,
        starts_at: datetime,
        onset: datetime,
        change_kind: str = "",
        excluded: bool = False,
        own_keys: tuple[tuple[str, str], ...] | None = None,
        own_scan: tuple[tuple[str, str], ...] = (),
        unplaced: int = 0,
    ) -> None:
        self.alert = alert
        self.key = key
        self.cls = cls
        self.scope = scope
        self.t = t
        self.end_t = end_t
        self.partition = partition
        self.starts_at = starts_at  # as_utc(alert.starts_at): Member.starts_at
        self.onset = onset
        self.change_kind = change_kind
        self.excluded = excluded
        self.nodes: frozenset[str] = _NOWHERE
        self.gpus: frozenset[str] = _NOWHERE
        self.placement: tuple | None = None
        self.member: Member | None = None
        self.member_end: float | None = None
        self.index_keys: Sequence[tuple[str, str]] = ()  # a tuple (a list only inside `_reindex`)
        self.edges: list[list] = []  # [cause, effect, rule, lag, relation, Edge or None]
        self.links: list[_Entry] = []
        self.undo: list[tuple] = []
        self.sort_key = (t, key)
        self.mode = mode = cls.failure_mode
        number = _MODE_IDS.get(mode)
        if number is None:
            number = _MODE_IDS[mode] = len(_MODE_IDS)
        self.mode_id = number
        self.stamp = 0
        self.own_keys = own_keys
        self.own_scan = own_scan  # own_keys less the alert-name bucket
        self.kin: _Entry = self  # union-find over kept same-mode links inside one group
        self.kin_size = 1
        self.incoming = 0  # kept causal edges into this alert from its own group
        self.number = 0  # its position in the incident being built
        self.scan_keys: Sequence[tuple[str, str]] = ()  # the buckets its last scan read, with
        self.scan_version = -1  # and the topology's version then (see _Partition._scan_keys_now)
        # 1: a node/GPU-level fault that joins the fault bucket (_FAULTS); 2: a pod alert of an
        # `unplaced` rule's effect mode, which reads it while its pod is placed nowhere.
        self.unplaced = unplaced


class _ModeList(list[_Entry]):
    """One mode's alerts of a workload/model bucket, in event-time order, with same-component runs.

    `starts[i]` is where the run holding alert i begins: alerts starts[i]..i were all in one
    same-mode component when alert i was added. Components only grow while alert i is indexed
    (undoing a union made by it or before means undoing alert i first), so that stays true, and a
    scan that finds a component has nothing more to give passes its whole run at once.

    `sources` holds, in order, the positions of alerts that had no kept incoming edge when added.
    An indexed alert's kept incoming edges only grow (one from a later alert is undone with that
    alert, before it), so every alert here with none now is listed: a scan that may still owe
    the older alerts of a run an edge into such an alert (_UNKEPT) passes the run down to these.
    """

    __slots__ = ("starts", "sources")

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[int] = []
        self.sources: list[int] = []

    def run_start(self, last: int, kin: _Entry) -> int:
        """Where a run of component `kin` ending at `last` begins, joining runs merged since."""
        start = self.starts[last]
        while start and _kin_root(self[start - 1]) is kin:
            start = self.starts[start - 1]
        return start


class _Kept:
    """What one alert's scan has kept from each same-mode component of its open neighbours.

    Ranking walks causal edges and same-mode links only to count what a candidate reaches, so
    within one group a second link into a same-mode component already joined, a second edge from
    (or to) the same component, or a link between two modes adds nothing it can see. Those are not
    recorded, and a neighbour that could only add such things is not even compared. An edge into
    an alert with no kept incoming edge yet is always kept, so sources stay sources.
    """

    __slots__ = ("x", "partition", "marks", "open")

    def __init__(self, x: _Entry, partition: _Partition) -> None:
        self.x = x
        self.partition = partition
        self.marks: dict[_Entry, int] = {}  # component root -> _FORWARD/_BACKWARD/_LINK kept
        self.open: dict[str, bool] = {}

    def settle(self, y: _Entry, kin: _Entry, root: str, found: int) -> None:
        """Keep what link() just recorded on x only if ranking can tell it from what x holds."""
        x = self.x
        is_open = self.open.get(root)
        if is_open is None:
            partition = self.partition
            is_open = self.open[root] = partition.engine.is_open(partition.agg[root], x.t)
        if not is_open:
            return
        if found == _LINK:
            if kin is _kin_root(x):
                x.links.pop()
            else:
                self._join(kin)
            return
        mark = self.marks.get(kin, 0)
        if found == _FORWARD:
            if mark & _FORWARD:
                x.edges.pop()
                return
            self.marks[kin] = mark | _FORWARD
            effect = x
        else:
            if mark & _BACKWARD and y.incoming:
                x.edges.pop()
                return
            self.marks[kin] = mark | _BACKWARD
            effect = y
        effect.incoming += 1
        x.undo.append(("in", effect))

    def _join(self, kin: _Entry) -> None:
        mine = _kin_root(self.x)
        big, small = (kin, mine) if kin.kin_size >= mine.kin_size else (mine, kin)
        small.kin = big
        big.kin_size += small.kin_size
        self.x.undo.append(("kin", small, big))
        self.marks[big] = self.marks.pop(small, 0) | self.marks.get(big, 0) | _LINK


def _kin_root(entry: _Entry) -> _Entry:
    while entry.kin is not entry:
        entry = entry.kin
    return entry


def _scope_keys(scope: Scope) -> tuple[tuple[str, str], ...]:
    """Buckets a scope's neighbours are found in, sorted; a gateway key covers its deployment and model."""
    keys: list[tuple[str, str]] = [("gw", k) for k in scope.gateway_keys]
    if scope.pod:
        keys.append(("pod", scope.pod))
        if scope.group != scope.pod:  # a worker of a pod group is found with its leader's alerts too
            keys.append(("pod", scope.group))
    if scope.node:
        keys.append(("node", scope.node))
    keys.extend(("gpu", g) for g in scope.gpus)
    if scope.deployment and not gateway_key(scope.deployment):
        keys.append(("dep", scope.deployment))
    if scope.model and not gateway_key(scope.model):
        keys.append(("model", scope.model))
    return tuple(sorted(keys))


def _epoch(moment: datetime) -> float:
    return (as_utc(moment) - _EPOCH).total_seconds()


_sort_key = attrgetter("sort_key")  # an entry's (onset time, key); in C, as groups are sorted per build


def _edge(cause: _Entry, effect: _Entry, rule_id: str, lag: float, relation: str) -> list:
    """A causal edge as link() finds it; its `Edge` is made once, when an incident first shows it."""
    return [cause, effect, rule_id, lag, relation, None]


def _made_edge(record: list) -> Edge:
    cause, effect, rule_id, lag, relation, _ = record
    edge = object.__new__(Edge)  # as in _new_member: an equal frozen Edge without its slow __init__
    edge.__dict__.update(cause=cause.key, effect=effect.key, rule=rule_id, lag_seconds=lag, relation=relation)
    record[5] = edge
    return edge


def _tightest(relations_found: frozenset[str]) -> str:
    for name in _RELATION_ORDER:
        if name in relations_found:
            return name
    return next(iter(sorted(relations_found)), "same_cluster")


def _end_time(alert: Alert) -> float | None:
    if alert.status != RESOLVED or alert.ends_at is None:
        return None
    end = as_utc(alert.ends_at)
    if is_zero_time(end):
        return None
    return _epoch(end)
