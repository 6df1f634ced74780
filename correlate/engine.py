"""Grouping alerts into incidents, incrementally and in batch, with identical results.

Alerts are processed in event-time order (onset, then occurrence key), each compared with the
few earlier neighbours that share a scope key within the widest rule lag. An alert joins every
open incident it links to (merging them) or opens a new one. Because the outcome is a function
of that order only, an alert arriving late rolls its cluster back to where it belongs and
replays what follows; the same set of alerts therefore gives the same incidents in any arrival
order. Clusters are independent, so a late alert replays only its own cluster.
"""
from __future__ import annotations

import bisect
from itertools import islice
from operator import attrgetter
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterable, Sequence

from correlate.catalog import Catalog, load_catalog
from correlate.classify import Classification, Classifier
from correlate.events import RESOLVED, Alert, occurrence_key
from correlate.ranking import numbered_edges, rank_numbered
from correlate.results import Decision, Edge, Exclude, FalsePositive, Incident, Member, Merge, Split
from correlate.timing import MAX_LOOKBACK, as_utc, lookback
from correlate.topology import Scope, Topology, gateway_key, in_change_scope, relations, scope_of

_TIGHT = frozenset({"same_pod", "same_gpu"})
_RELATION_ORDER = ("same_pod", "same_gpu", "same_node", "same_group", "same_deployment", "sibling", "same_model",
                   "gateway", "same_namespace", "in_change_scope", "same_cluster")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MODE_IDS: dict[str, int] = {}  # failure mode -> small number, to look pair gaps up in a list
_WIDE_KEYS = frozenset({"gw", "dep", "model"})  # buckets of a workload or model, not of one place
# Relations the pod/node/GPU buckets find (a pod group's alerts are all in its leader's pod bucket).
_LOCAL = frozenset({"same_pod", "same_gpu", "same_node", "co_located", "same_group"})
_NOWHERE: frozenset[str] = frozenset()
_MAX_LOOKBACK_SECONDS = MAX_LOOKBACK.total_seconds()  # the furthest an alert is placed before it fired


class _Entry:
    """One alert occurrence as a cluster holds it: prepared once, then linked, indexed and undone.

    A plain slotted class with a positional constructor: one is made per alert, and a dataclass's
    generated keyword __init__ cost twice as much (2.1 against 0.9 us, 6% of a batch).
    """

    __slots__ = ("alert", "key", "cls", "scope", "t", "end_t", "partition", "starts_at", "onset", "change_kind", "excluded",
                 "nodes", "gpus", "placement", "member", "member_end", "index_keys", "edges", "links", "undo",
                 "sort_key", "mode", "stamp", "own_keys", "own_scan", "mode_id", "kin", "kin_size", "incoming",
                 "number", "scan_keys", "scan_version")

    def __init__(self, alert: Alert, key: str, cls: Classification, scope: Scope, t: float, end_t: float | None,
                 partition: str, starts_at: datetime, onset: datetime, change_kind: str = "", excluded: bool = False,
                 own_keys: tuple[tuple[str, str], ...] | None = None, own_scan: tuple[tuple[str, str], ...] = ()) -> None:
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
        self.index_keys: tuple[tuple[str, str], ...] = ()
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


class _ModeList(list):
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

    def run_start(self, last: int, kin: "_Entry") -> int:
        """Where a run of component `kin` ending at `last` begins, joining runs merged since."""
        start = self.starts[last]
        while start and _kin_root(self[start - 1]) is kin:
            start = self.starts[start - 1]
        return start


class _Partition:
    """One cluster's alerts in event-time order, its neighbour index and its incident forest."""

    def __init__(self, name: str, engine: "Correlator") -> None:
        self.name = name
        self.engine = engine
        self.entries: list[_Entry] = []
        self.sort_keys: list[tuple[float, str]] = []
        self.index: dict[tuple[str, str], list[_Entry]] = {}
        # The workload/model buckets again, split by failure mode number (each in event-time
        # order): a scan reads there only the modes that can link beyond one pod/GPU/node.
        self.by_mode: dict[tuple[str, str], dict[int, _ModeList]] = {}
        # Per pod bucket, the node label every alert in it carries ("" when they differ or one has
        # none): such a bucket is all inside that node's bucket, and a scan reading both (sorted,
        # the node's first) meets nothing new in it (see `_process`).
        self.pod_node: dict[tuple[str, str], str] = {}
        self.changes: list[_Entry] = []
        self.topology = Topology(grace=engine.topology_grace)
        self.parent: dict[str, str] = {}
        self.size: dict[str, int] = {}
        self.agg: dict[str, list] = {}
        self._placements: dict[int, tuple] = {}
        self._scan_keys_cache: dict[tuple, tuple] = {}  # (scope id, nodes, GPUs) -> scan keys and when they hold

    def find(self, key: str) -> str:
        parent = self.parent
        while parent[key] != key:
            key = parent[key]
        return key

    def members(self, root: str) -> list[_Entry]:
        return self.agg[root][4]

    def ingest(self, fresh: list[_Entry], touched: list[_Entry]) -> list[_Entry]:
        """Place new entries and re-run everything from the earliest point they can change."""
        positions = [bisect.bisect_left(self.sort_keys, e.sort_key) for e in fresh + touched]
        topology_moved = False
        for entry in fresh:
            for kind, value, valid_from in self.topology.learn(entry.scope, entry.t):
                topology_moved = True
                positions.append(self._first_touched(entry.scope.pod, kind, value, valid_from))
        if not positions:
            return []
        start = min(positions)
        suffix = self.entries[start:]
        replay = self._replay_for(suffix, touched) if suffix and not topology_moved else None
        if replay is None:
            before = self.engine._before
            for entry in suffix:
                before[entry.key] = self.signature(entry)
            self._rollback(suffix)
        else:
            self._rollback_groups(suffix)  # the index is cut back only where a re-linked alert goes
        if fresh:
            tail = suffix + fresh
            tail.sort(key=_sort_key)
            del self.entries[start:]
            self.entries.extend(tail)
            del self.sort_keys[start:]
            self.sort_keys.extend([e.sort_key for e in tail])
        replayed = self.entries[start:]
        if replay is None:
            for entry in replayed:
                if entry.undo:  # _relink(entry), inline: a batch links every alert through here
                    entry.edges, entry.links, entry.undo = [], [], []
                self._process(entry)
        else:
            for entry in replayed:
                if replay.must_relink(entry):
                    replay.note_before(entry)
                    self._cut_for(entry, replay.cut)
                    self._relink(entry)
                    replay.taint(entry)
                else:
                    self._repeat(entry)
                    self._reindex(entry, replay.cut)
            replay.note_reached(replayed)
        return replayed

    def _replay_for(self, suffix: list[_Entry], touched: list[_Entry]) -> _Replay | None:
        """With the topology as it was, most alerts after a late one can repeat what they did
        (None: roll everything back and link it all again, the plain way)."""
        return _Replay(self, suffix, touched)

    def _first_touched(self, pod: str, kind: str, value: str, since: float) -> int:
        """Earliest processed alert from `since` on the pod, the node/GPU, or the pods on it.

        Only those can see a new pod->node/GPU link, so the replay starts there, not at `since`;
        and none needs a replay when the link changes no outcome (see `_link_changes_nothing`).
        """
        first = len(self.entries)
        if self._link_changes_nothing(pod, kind, value, since):
            return first
        buckets = [("pod", pod), (kind, value)] + [("pod", other) for other in self.topology.pods_on(kind, value, float("inf"))]
        for index_key in buckets:
            bucket = self.index.get(index_key)
            if bucket:
                at = bisect.bisect_left(bucket, since, key=lambda e: e.t)
                if at < len(bucket):
                    first = min(first, bisect.bisect_left(self.sort_keys, bucket[at].sort_key))
        return first

    def _link_changes_nothing(self, pod: str, kind: str, value: str, valid_from: float) -> bool:
        """Whether a new pod->node/GPU link leaves every processed outcome as it was.

        It does when every alert of the pod that a later alert can still reach names that
        node/GPU itself (their placements stay the same, and they already sit in its bucket), or
        when nothing else is on that node/GPU and, for the catalog, being on one node/GPU adds
        nothing to being on one pod (the pod's alerts only gain a relation to each other); their
        stored placements are then brought up to date as a replay would.
        """
        since = valid_from - self.engine.window
        if any(change.t >= since for change in self.changes):
            return False
        bucket = self.index.get(("pod", pod), ())
        lacking = False
        namespaces = set()
        for entry in reversed(bucket):
            if entry.t < since:
                break
            namespaces.add(entry.scope.namespace)
            if (entry.scope.node != value) if kind == "node" else (value not in entry.scope.gpus):
                lacking = True
        if not lacking:
            return True
        if kind not in self.engine._implied_by_same_pod or len(namespaces - {""}) > 1:
            return False
        if any(other != pod for other in self.topology.pods_on(kind, value, float("inf"))):
            return False
        for entry in reversed(self.index.get((kind, value), ())):
            if entry.t < since:
                break
            if entry.scope.pod != pod:
                return False
        for entry in reversed(bucket):
            if entry.t < valid_from:
                break
            entry.nodes, entry.gpus = self.topology.nodes(entry.scope, entry.t), self.topology.gpus(entry.scope, entry.t)
        return True

    def signature(self, entry: _Entry) -> tuple:
        """Enough of an entry's incident to tell whether a replay changed it."""
        if entry.excluded or entry.key not in self.parent:
            return ()
        agg = self.agg[self.find(entry.key)]
        members = agg[4]
        return (len(members), agg[0], agg[2], agg[3], members[0].key, len(entry.edges), len(entry.links))

    def _rollback(self, suffix: list[_Entry]) -> None:
        for entry in reversed(suffix):
            self._undo(entry)
            self._unindex(entry)

    def _rollback_groups(self, suffix: list[_Entry]) -> None:
        """A partial replay's rollback: groups, same-mode components, kept edges' counts and the
        changes go back to the late alert's place, the index buckets stay as they are for now.

        An alert that repeats goes back to the same place in each bucket, so a bucket no alert
        linked again reads or joins ends up as it was: it is never touched. The buckets an alert
        linked again reads or joins are cut back to its place first (`_cut_for`), and the alerts
        after it join them again in turn (`_reindex`). Between the rollback and those cuts, a
        bucket can hold alerts whose groups are rolled back; only a re-linked alert reads such
        state, and it reads only buckets cut to its place.
        """
        for entry in reversed(suffix):
            self._undo(entry)

    def _undo(self, entry: _Entry) -> None:
        """Take back what linking `entry` did to the groups (its index buckets: `_unindex`).

        Its edges, links and undo log stay on it: an alert that repeats what it did (`_repeat`)
        takes them up again as they are, and one linked again starts afresh (`_relink`).
        """
        parent, size, agg = self.parent, self.size, self.agg
        for op in reversed(entry.undo):
            kind = op[0]
            if kind == "new":
                key = op[1]
                del parent[key], size[key], agg[key]
            elif kind == "kin":
                _, child, root = op
                child.kin = child
                root.kin_size -= child.kin_size
            elif kind == "in":
                op[1].incoming -= 1
            else:
                _, child, root, old_agg, old_len = op
                parent[child] = child
                size[root] -= size[child]
                group = agg[root]
                group[0], group[1], group[2], group[3] = old_agg
                del group[4][old_len:]
        if self.changes and self.changes[-1] is entry:
            self.changes.pop()

    def _unindex(self, entry: _Entry) -> None:
        """`entry` leaves its buckets, where it is the latest alert (the rollback runs backwards)."""
        mode_id = entry.mode_id
        for index_key in entry.index_keys:
            bucket = self.index[index_key]
            bucket.pop()
            if not bucket:
                del self.index[index_key]
                self.pod_node.pop(index_key, None)
            if index_key[0] in _WIDE_KEYS:
                modes = self.by_mode[index_key]
                same_mode = modes[mode_id]
                same_mode.pop()
                same_mode.starts.pop()
                if same_mode.sources and same_mode.sources[-1] == len(same_mode):
                    same_mode.sources.pop()
                if not same_mode:
                    del modes[mode_id]
                    if not modes:
                        del self.by_mode[index_key]
        entry.index_keys = ()

    def _cut_for(self, x: _Entry, cut: set[tuple[str, str]]) -> None:
        """Before x is linked again in a partial replay: the buckets it is in, joins or reads are
        cut back to its place (what is after it there is replayed after it, and joins again).

        It reads its scan buckets (placed as `_process` places it; the pod bucket among them) and,
        as a change, its own buckets; it joins its own buckets, and it leaves those it was in.
        """
        keys = x.own_keys
        if keys is None:  # as in _process: a new end clears them
            x.own_keys, x.own_scan = self.engine._keys_of(x.scope, x.alert.alertname)
            keys = x.own_keys
        reads = set(x.index_keys).union(keys)
        if not x.excluded and x.mode != "change":
            self._place(x)
            reads.update(self._scan_keys_now(x))
        x.index_keys = ()  # out of them all now; _index puts it back
        reads.difference_update(cut)
        for index_key in reads:
            self._cut(index_key, x.sort_key)
        cut.update(reads)

    def _cut(self, index_key: tuple[str, str], sort_key: tuple[float, str]) -> None:
        """A bucket (and its per-mode lists) without its alerts from `sort_key` on."""
        bucket = self.index.get(index_key)
        if not bucket:
            return
        at = bisect.bisect_left(bucket, sort_key, key=_sort_key)
        if at == len(bucket):
            return
        del bucket[at:]
        if not bucket:
            del self.index[index_key]
            self.pod_node.pop(index_key, None)
        modes = self.by_mode.get(index_key)
        if modes is None:
            return
        for mode_id, same_mode in list(modes.items()):
            at = bisect.bisect_left(same_mode, sort_key, key=_sort_key)
            if at < len(same_mode):
                del same_mode[at:]
                del same_mode.starts[at:]
                del same_mode.sources[bisect.bisect_left(same_mode.sources, at):]
                if not same_mode:
                    del modes[mode_id]
        if not modes:
            del self.by_mode[index_key]

    def _reindex(self, x: _Entry, cut: set[tuple[str, str]]) -> None:
        """A repeated alert joins again the buckets cut before it; in the others it never left its place."""
        keys = x.index_keys
        if keys and not cut.isdisjoint(keys):
            self._index(x, [index_key for index_key in keys if index_key in cut])
            x.index_keys = keys

    def _relink(self, x: _Entry) -> None:
        """Link x (again): what a rollback left on it is dropped first.

        An alert linked before always has its group's "new" in its undo log; one never linked
        (or excluded) has nothing recorded, and keeps its empty lists (a batch allocates none).
        """
        if x.undo:
            x.edges, x.links, x.undo = [], [], []
        self._process(x)

    def _process(self, x: _Entry) -> None:
        if x.excluded:
            return
        engine = self.engine
        topology = self.topology
        x_pod = x.scope.pod
        if x_pod and (x_pod in topology.pod_nodes or x_pod in topology.pod_gpus):  # _place(x), inline
            x.nodes, x.gpus = self._placement(x, x.t)  # = topology.nodes/gpus(x.scope, x.t), cached
        else:
            x.nodes = topology.nodes(x.scope, x.t)
            x.gpus = topology.gpus(x.scope, x.t)
        keys = x.own_keys
        if keys is None:  # set when the alert was prepared; a new end clears it
            x.own_keys, x.own_scan = engine._keys_of(x.scope, x.alert.alertname)
            keys = x.own_keys
        linked: set[str] = set()
        x_t = x.t
        x_mode = x.mode
        # Per earlier mode's number: the widest gap to x's mode, what a pair could still add (on
        # any scopes, and on no common pod/GPU/node), whether the two differ, and whether the mode
        # can link to x's beyond one pod/GPU/node; and the scan's reach back in time.
        windows, needs, apart_needs, local_only, wide_mode, all_modes, reach, tight_only = engine._scan_tables(x_mode)
        # Indexed alerts are never changes, so no earlier alert beyond the widest gap any
        # non-change mode has to x's mode can link (link() checks that gap first).
        horizon = x_t - reach
        engine._stamp += 1
        stamp = engine._stamp
        index, by_mode, pod_node = self.index, self.by_mode, self.pod_node
        pod_nodes, pod_gpus = topology.pod_nodes, topology.pod_gpus
        pod_versions = topology.pod_versions
        link = engine._link  # the gap was checked just above
        x_nodes, x_gpus = x.nodes, x.gpus
        x_placed = bool(x_nodes or x_gpus)  # else no pair can share a node or GPU
        x_group = x.scope.group or None
        kept = _Kept(x, self)
        marks = kept.marks
        reorder, slack, x_depth = engine.reorder, engine.slack, x.cls.depth
        read_runs: dict[tuple[int, int], list[_Entry]] = {}
        scan_keys = x.scan_keys = self._scan_keys(x, x.own_scan) if x_mode != "change" else ()
        x.scan_version = topology.version
        for index_key in scan_keys:
            bucket = index.get(index_key)
            if not bucket:
                continue
            if index_key[0] == "pod":
                node = pod_node[index_key]
                if node and ("node", node) in scan_keys:
                    # Every alert in it is in that node's bucket too, read before it (the keys are
                    # sorted) under the same checks: each was compared there, or passed over for
                    # its mode or its gap, as it would be here. In a storm, a third of all reads.
                    continue
            # A workload/model bucket is read only for modes that can link to x there; any other
            # pair needs the same pod, GPU or node, and their buckets are read in full. A dense
            # one (a storm) is read from its per-mode lists, one readable mode after another:
            # what is kept from one component never depends on another mode's alerts, so only
            # the order inside a mode (newest first) matters.
            runs: Sequence[list[_Entry]] = (bucket,)
            reads = all_modes
            if index_key[0] in _WIDE_KEYS:
                if len(bucket) > _DENSE and bucket[-_DENSE].t >= horizon:
                    runs = self._unread_runs(by_mode[index_key], wide_mode, read_runs)
                else:
                    reads = wide_mode
            for run in runs:
                starts = run.starts if type(run) is _ModeList else None
                newest_first = reversed(run)
                for y in newest_first:  # x joins the index only after the scan
                    y_t = y.t
                    if y_t < horizon:
                        break
                    if y.stamp == stamp or not reads[y.mode_id]:
                        continue
                    # link() rejects a pair beyond its modes' widest gap first; checked here to
                    # skip the placement lookup too.
                    dt = x_t - y_t
                    if dt > windows[y.mode_id]:
                        continue
                    y.stamp = stamp
                    kin = y.kin
                    while kin.kin is not kin:
                        kin = kin.kin
                    mark = marks.get(kin)
                    placed = False
                    if mark is not None:
                        # _Kept's rule, inline (it runs for most neighbours in a storm): skip y
                        # when all it could add is already kept from its component.
                        forward_lag, backward, same = needs[y.mode_id]
                        apart = False
                        if local_only[y.mode_id] and y.scope.pod != x_pod:
                            # A causal rule that needs one pod, GPU or node cannot link y when y
                            # is on none of x's: then only the wider rules can still add something.
                            if x_placed:
                                y_nodes, y_gpus = self._placement_at(y, x_t)
                                placed = True
                                apart = y_nodes.isdisjoint(x_nodes) and y_gpus.isdisjoint(x_gpus)
                            else:
                                apart = True
                            if apart and x_group is not None and y.scope.group == x_group:
                                apart = False  # one pod group: its rules link across nodes
                            if apart:
                                forward_lag, backward, same = apart_needs[y.mode_id]
                        wanted = _FORWARD if dt <= forward_lag else 0
                        if same:
                            wanted |= _LINK
                        if backward and ((dt <= reorder and x_depth > y.cls.depth) if same else dt <= slack):
                            wanted = wanted | _BACKWARD if y.incoming else _UNKEPT
                        if not wanted & ~mark:
                            if starts is not None:
                                # What an older alert of this run could add is no more than y's
                                # (the gap only grows), so the run is passed over at once; when y
                                # was judged apart from x, only if no alert of the run can be on
                                # x's pod, GPU or node either.
                                at = newest_first.__length_hint__()  # y's position in the run
                                start = starts[at]
                                if backward and dt <= (reorder if same else slack):
                                    # Except an edge from x into an older one (x can still be its
                                    # cause): once the component holds one, only alerts with no
                                    # kept incoming edge (_UNKEPT) can take another, so the pass
                                    # stops above the newest of them. Without one (y's depth
                                    # ruled it out), a shallower older alert may still want it.
                                    if not mark & _BACKWARD:
                                        continue
                                    sources = run.sources
                                    newest = bisect.bisect_left(sources, at) - 1
                                    if newest >= 0 and sources[newest] >= start:
                                        start = sources[newest] + 1
                                if at > start and (not apart or not x_placed and self._pod_quiet(
                                        x_pod, y.mode_id, run[start].t, y_t)):
                                    # The reverse list iterator's state is the index it yields
                                    # next: setting it passes the run in one step, not one by one.
                                    newest_first.__setstate__(start - 1)
                            continue
                    if not placed:  # _placement_at(y, x_t), inline: it runs for every neighbour compared
                        pod = y.scope.pod
                        if pod and (pod in pod_nodes or pod in pod_gpus):  # topology.knows(pod)
                            cached = y.placement  # _placement's cache, read inline on its fast path
                            if cached is not None and x_t >= cached[1] and cached[0] == pod_versions.get(pod, 0):
                                y_nodes, y_gpus = cached[2], cached[3]
                            else:
                                y_nodes, y_gpus = self._placement(y, x_t)
                        else:
                            y_nodes, y_gpus = y.nodes, y.gpus
                    if tight_only[y.mode_id] and y.scope.pod != x_pod and (
                            not y_gpus or not x_gpus or y_gpus.isdisjoint(x_gpus)):
                        continue  # no rule links the two modes, and the pair shares no pod nor GPU
                    found = link(y, x, y_nodes, y_gpus, dt)
                    if found:
                        root = self.find(y.key)
                        linked.add(root)
                        if found != _LINK or y.mode_id == x.mode_id:
                            kept.settle(y, kin, root, found)
        if x.mode != "change":
            change_horizon = x.t - max(engine.change_window, engine.rule_edit_window)
            for i in range(len(self.changes) - 1, -1, -1):
                change = self.changes[i]
                if change.t < change_horizon:
                    break
                if engine.link_change(change, x):
                    linked.add(self.find(change.key))
        elif x.change_kind in ("remediation", "rule_edit"):
            linked.update(self.find(y.key) for y in self._remediated(x, keys))
        else:
            linked.update(self.find(y.key) for y in self._fired_after(x, keys))
        self._open_group(x)
        if linked:
            agg = self.agg
            for root in sorted(linked) if len(linked) > 1 else linked:
                if engine.is_open(agg[root], x.t):
                    self._union(self.find(root), self.find(x.key), x.undo)
        self._index(x, keys)

    def _place(self, x: _Entry) -> None:
        """x's nodes and GPUs as known at its time (inline in _process)."""
        topology = self.topology
        x_pod = x.scope.pod
        if x_pod and (x_pod in topology.pod_nodes or x_pod in topology.pod_gpus):
            x.nodes, x.gpus = self._placement(x, x.t)  # = topology.nodes/gpus(x.scope, x.t), cached
        else:
            x.nodes = topology.nodes(x.scope, x.t)
            x.gpus = topology.gpus(x.scope, x.t)

    def _open_group(self, x: _Entry) -> None:
        """x's own group; the undo log holds its aggregate, which a rollback leaves as it was made
        (unions into it are undone first), so a repeat puts the very same list back."""
        self.parent[x.key] = x.key
        self.size[x.key] = 1
        group = self.agg[x.key] = [x.t, x.t, 1 if x.end_t is None else 0, self._influence_end(x), [x]]
        x.undo.append(("new", x.key, group))

    def _index(self, x: _Entry, keys: tuple[tuple[str, str], ...]) -> None:
        """x joins its buckets (and a dense bucket's per-mode list, with its run start) after its scan."""
        if x.mode == "change":
            self.changes.append(x)
        else:
            index, by_mode, mode_id = self.index, self.by_mode, x.mode_id
            pod_node, x_node = self.pod_node, x.scope.node
            kin = _kin_root(x)
            for index_key in keys:
                bucket = index.get(index_key)  # not setdefault(key, []): that makes a list per call
                if bucket is None:
                    bucket = index[index_key] = []
                    if index_key[0] == "pod":
                        pod_node[index_key] = x_node
                elif index_key[0] == "pod" and pod_node[index_key] != x_node:
                    pod_node[index_key] = ""
                bucket.append(x)
                if index_key[0] in _WIDE_KEYS:
                    modes = by_mode.get(index_key)
                    same_mode = modes.get(mode_id) if modes is not None else None
                    if same_mode is None:
                        same_mode = by_mode.setdefault(index_key, {})[mode_id] = _ModeList()
                    # _ModeList.add(), inline: every alert of a model goes through here.
                    start = len(same_mode)
                    if not x.incoming:
                        same_mode.sources.append(start)
                    if start:
                        last = same_mode[-1].kin
                        while last.kin is not last:
                            last = last.kin
                        if last is kin:
                            start = same_mode.run_start(start - 1, kin)
                    same_mode.starts.append(start)
                    same_mode.append(x)
            x.index_keys = keys

    def _repeat(self, x: _Entry) -> None:
        """Do again what linking x did before a rollback, when `_Replay` shows it would do the same.

        Its kept edges and links are still on it, and its undo log (kept edges' counts, same-mode
        joins, its group and the unions it made) is applied in the order it was written; the
        groups it touches are as they were then, so each union has the same root and child and
        the log stays what it was (no entry of it is made again).
        """
        if x.excluded:
            return
        parent, size, agg = self.parent, self.size, self.agg
        for op in x.undo:
            kind = op[0]
            if kind == "in":
                op[1].incoming += 1
            elif kind == "kin":
                _, child, root = op
                child.kin = root
                root.kin_size += child.kin_size
            elif kind == "new":
                _, key, group = op
                parent[key] = key
                size[key] = 1
                agg[key] = group
            else:
                child, root = op[1], op[2]
                parent[child] = root
                size[root] += size[child]
                _absorb(agg[root], agg[child])

    @staticmethod
    def _unread_runs(modes: dict[int, list[_Entry]], readable: list[bool],
                     read_runs: dict[tuple[int, int], list[_Entry]]) -> list[list[_Entry]]:
        """A dense bucket's readable per-mode lists that this scan has not read already.

        Model names reduce to several gateway keys whose buckets often hold the very same
        alerts; reading an equal list again would only meet alerts already compared or out of
        their gap. Lists are compared in C (by identity of their alerts), only when their
        length and newest alert agree.
        """
        runs = []
        for mode_id, run in modes.items():
            if readable[mode_id]:
                seen_key = (id(run[-1]), len(run))
                seen = read_runs.get(seen_key)
                if seen is None or seen != run:
                    read_runs[seen_key] = run
                    runs.append(run)
        return runs

    def _pod_quiet(self, pod: str, mode_id: int, since: float, until: float) -> bool:
        """Whether `pod` has no alert of this mode from `since` to `until` (an empty pod has none)."""
        bucket = self.index.get(("pod", pod)) if pod else None
        if not bucket:
            return True
        for number in range(bisect.bisect_left(bucket, since, key=lambda e: e.t), len(bucket)):
            entry = bucket[number]
            if entry.t > until:
                return True
            if entry.mode_id == mode_id:
                return False
        return True

    def _placement_at(self, y: _Entry, at: float) -> tuple[frozenset[str], frozenset[str]]:
        """y's nodes and GPUs as known at `at`: `_placement`'s cache read on its fast path."""
        pod = y.scope.pod
        topology = self.topology
        if pod and (pod in topology.pod_nodes or pod in topology.pod_gpus):  # topology.knows(pod)
            cached = y.placement
            if cached is not None and at >= cached[1] and cached[0] == topology.pod_versions.get(pod, 0):
                return cached[2], cached[3]
            return self._placement(y, at)
        return y.nodes, y.gpus

    def _placement(self, y: _Entry, at: float) -> tuple[frozenset[str], frozenset[str]]:
        """y's nodes and GPUs as known at `at`, cached while no link of its pod changes."""
        topology = self.topology
        cached = y.placement
        pod = y.scope.pod
        # Only the links of y's own pod decide its placement, so the cache holds until they change.
        version = topology.pod_versions.get(pod, 0)
        if cached is None or cached[0] != version:
            # The answer depends on the scope and its pod's links only: shared by equal scopes
            # (the cached value holds the scope, so its id cannot be reused).
            cached = self._placements.get(id(y.scope))
            if cached is None or cached[0] != version:
                times = sorted({t for table in (topology.pod_nodes, topology.pod_gpus) for t in table.get(pod, {}).values()})
                cached = (version, topology.latest_since(pod),
                          topology.nodes(y.scope, float("inf")), topology.gpus(y.scope, float("inf")), times, {}, y.scope)
                self._placements[id(y.scope)] = cached
            y.placement = cached
        if at >= cached[1]:
            return cached[2], cached[3]
        # Between two consecutive link start times the answer is the same: memoised per interval.
        slot = bisect.bisect_right(cached[4], at)
        found = cached[5].get(slot)
        if found is None:
            found = cached[5][slot] = (topology.nodes(y.scope, at), topology.gpus(y.scope, at))
        return found

    def _remediated(self, change: _Entry, keys: tuple[tuple[str, str], ...]) -> list[_Entry]:
        """Earlier alerts a rollback, revert or rule edit answers: same scope, or the edited alert."""
        engine = self.engine
        found: dict[int, _Entry] = {}
        if change.change_kind == "rule_edit":
            bucket = self.index.get(("name", change.alert.alertname), [])
            for y in reversed(bucket):
                if y.t < change.t - engine.rule_edit_window:
                    break
                if engine.rule_edit_covers(change, y):
                    found[id(y)] = y
            return list(found.values())
        for index_key in keys:
            for y in reversed(self.index.get(index_key, [])):
                if y.t < change.t - engine.window:
                    break
                rel = relations(change.scope, y.scope, change.nodes, y.nodes, change.gpus, y.gpus)
                if in_change_scope(change.scope, y.scope, y.nodes, rel):
                    found[id(y)] = y
        return list(found.values())

    def _fired_after(self, change: _Entry, keys: tuple[tuple[str, str], ...]) -> list[_Entry]:
        """Earlier-placed alerts in the change's scope that fired after it: a rule over a wide
        window is placed at its window's start (`timing.lookback`), which may lie before the
        change that caused it, yet the window's end, when it fired, came after. Each gets the
        change's edge here, recorded on the change (linked later than the alert)."""
        engine = self.engine
        rules = engine._rule_pairs
        found: dict[int, _Entry] = {}
        for index_key in keys:
            for y in reversed(self.index.get(index_key, ())):
                if y.t < change.t - _MAX_LOOKBACK_SECONDS:
                    break
                if y.t >= change.t or id(y) in found or y.mode == "change" or y.excluded:
                    continue
                lag = _epoch(y.starts_at) - change.t
                if lag < 0 or lag > engine.change_window:
                    continue
                rel = relations(change.scope, y.scope, change.nodes, y.nodes, change.gpus, y.gpus)
                if not in_change_scope(change.scope, y.scope, y.nodes, rel):
                    continue
                rule = next((rule_id for rule_id, max_lag, _ in rules.get(("change", y.mode), ()) if lag <= max_lag), None)
                if rule is not None:
                    change.edges.append(_edge(change, y, rule, lag, "in_change_scope"))
                    found[id(y)] = y
        return list(found.values())

    def _scan_keys_now(self, x: _Entry) -> Sequence[tuple[str, str]]:
        """`_scan_keys` of x as placed: those its last scan read, while its placement stamp is
        the same (no link of its pod, nor of the pods on its nodes/GPUs, changed since)."""
        if not x.nodes and not x.gpus:
            return x.own_scan  # as _scan_keys answers
        if self._links_unchanged_since(x, x.scan_version):
            return x.scan_keys
        return self._scan_keys(x, x.own_scan)

    def _links_unchanged_since(self, x: _Entry, version: int) -> bool:
        """Whether nothing x's scan keys depend on besides its scope and time changed after that
        topology version: its pod's links (its nodes and GPUs) and the pods on its nodes/GPUs."""
        topology = self.topology
        if topology.version == version:
            return True
        if topology.pod_changed.get(x.scope.pod, 0) > version:
            return False
        changed = topology.node_changed
        if any(changed.get(node, 0) > version for node in x.nodes):
            return False
        changed = topology.gpu_changed
        return not any(changed.get(gpu, 0) > version for gpu in x.gpus)

    def _scan_keys(self, x: _Entry, own: tuple[tuple[str, str], ...]) -> Sequence[tuple[str, str]]:
        """Buckets holding x's possible neighbours, through learned links too (pods on x's node).

        In sorted order, whatever the order links were learned in: the first edge kept per
        same-mode component depends on it.
        """
        scope = x.scope
        if not x.nodes and not x.gpus:
            return own
        topology = self.topology
        # `own` follows from the scope, and the pods on x's nodes/GPUs stay the same between two
        # of their link start times: the answer holds there, until the topology learns a link.
        cache_key = (id(scope), x.nodes, x.gpus)
        hit = self._scan_keys_cache.get(cache_key)
        if hit is not None and hit[2] <= x.t < hit[3] and hit[1] == topology.version:
            return hit[0]
        learned = []
        since, until = float("-inf"), float("inf")
        for kind, values, direct in (("node", x.nodes, scope.node), ("gpu", x.gpus, scope.gpus)):
            for value in values:
                if value != direct and (kind == "node" or value not in direct):
                    learned.append((kind, value))
                for other in topology.pods_on(kind, value, x.t):
                    if other != scope.pod:
                        learned.append(("pod", other))
                began, changes = topology.pods_steady(kind, value, x.t)
                since, until = max(since, began), min(until, changes)
        keys = sorted(set(own).union(learned)) if learned else own
        if len(self._scan_keys_cache) > 100_000:
            self._scan_keys_cache.clear()
        self._scan_keys_cache[cache_key] = (keys, topology.version, since, until, scope)
        return keys

    def _influence_end(self, x: _Entry) -> float:
        """A change is over at once yet stays a suspect for its rule's lag, so it keeps its incident open."""
        if x.mode == "change":
            return max(x.end_t or x.t, x.t + self.engine.change_window)
        return x.end_t if x.end_t is not None else float("-inf")

    def _union(self, a: str, b: str, undo: list[tuple]) -> None:
        if a == b:
            return
        if self.size[a] < self.size[b] or (self.size[a] == self.size[b] and a > b):
            a, b = b, a
        root = self.agg[a]
        undo.append(("union", b, a, tuple(root[:4]), len(root[4])))
        self.parent[b] = a
        self.size[a] += self.size[b]
        _absorb(root, self.agg[b])


def _absorb(root: list, child: list) -> None:
    """A group's aggregate takes in another's: first and last time, unresolved count, latest
    influence end, members. (Comparisons, not min()/max(): the same values, without the calls.)"""
    if child[0] < root[0]:
        root[0] = child[0]
    if child[1] > root[1]:
        root[1] = child[1]
    root[2] += child[2]
    if child[3] > root[3]:
        root[3] = child[3]
    root[4].extend(child[4])


class _Replay:
    """Which alerts after a late one must be linked again; the others repeat what they did.

    A late alert rolls its cluster back to its place, yet most alerts after it sit elsewhere in
    the cluster (other workloads) and would link exactly as before. Linking an alert reads only
    the alerts in its scan buckets (and, of each, its group: root, size, open or not, same-mode
    component, kept incoming edges) and the changes in its horizon, nothing else of the cluster.
    An alert is *tainted* when a group holding an alert linked again holds it, in the replay (its
    group after that alert) or before the rollback (its final group then, which holds every group
    it was in). An alert whose buckets and changes hold no tainted alert finds everything it reads
    as it was, so it repeats its recorded outcome (`_Partition._repeat`). Only a replay with the
    topology as it was qualifies (a newly learned pod->node/GPU link moves placements and buckets).

    The same taint says whose incident can have changed: an alert never tainted repeated what it
    did in groups no re-linked alert reached, before or after, so its final group is the one it
    had (same members, times, counts, first member) and so are its own edges and links. Only
    alerts linked again or tainted (all of them once `relink_all` is set) have their incident's
    signature from before the rollback noted in `Correlator._before` for `add_many` to compare.
    """

    __slots__ = ("partition", "repeatable", "old_root", "old_members", "old_groups", "tainted", "hot", "tainted_upto",
                 "change_reach", "relink_all", "before", "cut")

    def __init__(self, partition: _Partition, suffix: list[_Entry], touched: list[_Entry]) -> None:
        self.partition = partition
        engine = partition.engine
        self.before = engine._before
        self.change_reach = max(engine.change_window, engine.rule_edit_window)
        # The alerts that may repeat: a new end or an exclusion is linked again. (Their edges,
        # links and undo logs from before the rollback stay on them: see `_Partition._undo`.)
        self.repeatable: set[_Entry] = set(suffix).difference(touched)
        self.old_root: dict[_Entry, str] = {}
        self.old_members: dict[str, list[_Entry]] = {}  # final groups before the rollback, copied
        self.old_groups: dict[str, tuple] = {}  # their part of `_Partition.signature`, before the rollback
        parent, agg, find = partition.parent, partition.agg, partition.find
        for entry in suffix:
            if entry.key in parent:
                root = self.old_root[entry] = find(entry.key)
                if root not in self.old_groups:
                    group = agg[root]
                    members = self.old_members[root] = group[4][:]
                    self.old_groups[root] = (len(members), group[0], group[2], group[3], members[0].key)
        self.tainted: set[_Entry] = set()
        self.cut: set[tuple[str, str]] = set()  # buckets cut back to a re-linked alert's place (see _rollback_groups)
        self.hot: set[tuple[str, str]] = set()  # buckets holding a tainted alert
        self.tainted_upto: dict[str, int] = {}  # group root -> how many of its members are tainted
        # A tainted group this big is a storm's, which nearly every alert after it reads: keeping
        # the taint would cost more than it saves, so the rest is linked again.
        self.relink_all = False

    def must_relink(self, entry: _Entry) -> bool:
        if self.relink_all or entry not in self.repeatable or entry.mode == "change":
            return True
        if entry.excluded:
            return False
        if not self.hot.isdisjoint(self.partition._scan_keys_now(entry)):
            return True
        changes = self.partition.changes
        if changes:
            horizon = entry.t - self.change_reach
            for change in reversed(changes):
                if change.t < horizon:
                    break
                if change in self.tainted:
                    return True
        return False

    def old_signature(self, entry: _Entry) -> tuple:
        """`_Partition.signature(entry)` as it was before the rollback (entry's edges and links
        are still those it had: noted before it is linked again, or it repeated them)."""
        root = self.old_root.get(entry)
        if root is None or entry.excluded:
            return ()
        return self.old_groups[root] + (len(entry.edges), len(entry.links))

    def note_before(self, entry: _Entry) -> None:
        """`entry` is about to be linked again: its incident's signature from before, to compare.
        (A new alert has none; `add_many` returns its incident anyway.)"""
        self.before[entry.key] = self.old_signature(entry)

    def may_have_changed(self, entry: _Entry) -> bool:
        """Whether a repeated alert's incident can differ from before the rollback (see above)."""
        return self.relink_all or entry in self.tainted

    def note_reached(self, replayed: list[_Entry]) -> None:
        """After the replay: the before-signatures of repeated alerts a re-linked one reached."""
        before = self.before
        for entry in replayed:
            if entry.key not in before and self.may_have_changed(entry):
                before[entry.key] = self.old_signature(entry)

    def taint(self, entry: _Entry) -> None:
        """`entry` was linked again: taint it, its group now and its final group before the rollback."""
        if self.relink_all:
            return
        self._add(entry)
        before = self.old_members.pop(self.old_root.get(entry, ""), None)
        if before is not None:
            if len(before) > _STORM_GROUP:
                self.relink_all = True
                return
            for member in before:
                self._add(member)
        partition = self.partition
        if entry.key in partition.parent:
            root = partition.find(entry.key)
            members = partition.agg[root][4]
            if len(members) > _STORM_GROUP:
                self.relink_all = True
                return
            # A group grows only by alerts linked again (one that repeats touches no tainted
            # group), so the members tainted before are still its first ones.
            for member in islice(members, self.tainted_upto.get(root, 0), None):
                self._add(member)
            self.tainted_upto[root] = len(members)

    def _add(self, entry: _Entry) -> None:
        if entry not in self.tainted:
            self.tainted.add(entry)
            self.hot.update(entry.own_scan)


_STORM_GROUP = 256  # a partial replay tainting a group this big links everything after again
_FORWARD, _BACKWARD, _LINK = 1, 2, 4
_DENSE = 32  # a workload/model bucket with this many alerts in a scan's horizon is read per mode
_UNKEPT = 8  # an edge into an alert with no kept incoming edge: never marked, so always compared


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


class Correlator:
    """Holds alerts and human decisions; answers with incidents, one alert at a time or in bulk.

    `add(alert)` returns the incidents that alert changed (its own, and any rebuilt by a late
    arrival); `incidents()` returns them all. Feeding the same alerts in any order, one by one
    or at once, gives the same incidents.
    """

    def __init__(self, catalog: Catalog | None = None, decisions: Iterable[Decision] = ()) -> None:
        self.catalog = catalog or load_catalog()
        self.classifier = Classifier(self.catalog)
        settings = self.catalog.settings
        self.slack = settings.onset_slack.total_seconds()
        self.same_mode_window = settings.same_mode_window.total_seconds()
        self.tight_window = settings.tight_scope_window.total_seconds()
        self.topology_grace = settings.topology_grace.total_seconds()
        self.reorder = settings.same_mode_reorder.total_seconds()
        self.rule_edit_window = self.catalog.changes.rule_edit_window.total_seconds()
        self.rule_edit_causal = self.catalog.changes.rule_edit_causal_within.total_seconds()
        self.same_mode_scope = settings.same_mode_scope
        self._same_mode_scopes = {name: info.same_mode_scope if info.same_mode_scope is not None else self.same_mode_scope
                                  for name, info in self.catalog.modes.items()}
        self.quiet = settings.quiet_after_resolve.total_seconds()
        self.max_idle = settings.max_idle.total_seconds()
        self.max_span = settings.max_span.total_seconds()
        change_rules = [r for r in self.catalog.rules if r.cause == "change"]
        other_lags = [r.max_lag.total_seconds() for r in self.catalog.rules if r.cause != "change"]
        self.window = max(other_lags + [self.same_mode_window, self.tight_window]) + self.slack
        self.change_window = max((r.max_lag.total_seconds() for r in change_rules), default=0.0)
        self._pair_window = self._pair_windows()
        self._pair_window_by_later: dict[str, dict[str, float]] = {}
        for (earlier, later), gap in self._pair_window.items():
            self._pair_window_by_later.setdefault(later, {})[earlier] = gap
        self._reach_by_later = {later: min(self.window, max([self.tight_window] + [gap for earlier, gap in gaps.items() if earlier != "change"]))
                                for later, gaps in self._pair_window_by_later.items()}
        self._implied_by_same_pod = self._kinds_implied_by_same_pod()
        self._stamp = 0
        self._relations_cache: dict[tuple, tuple] = {}
        self._prepared: dict[tuple, tuple] = {}
        self._window_lists: dict[str, list[float]] = {}
        self._tables: dict[str, tuple] = {}
        self._scope_keys: dict[int, tuple] = {}  # scope id -> (its sorted bucket keys, the scope)
        self._link_plans: dict[str, list[tuple[tuple, tuple]]] = {}
        self._pair_plans: dict[tuple, tuple] = {}  # (relations, earlier mode id, later mode id) -> _pair_plan()
        self._link_needs: dict[str, list[tuple[float, bool, bool]]] = {}
        self._apart_needs: dict[str, list[tuple[float, bool, bool]]] = {}
        self._local_rules: dict[str, list[bool]] = {}
        self._wide_modes: dict[str, list[bool]] = {}
        self._scope_shapes: dict[tuple, Scope] = {}
        self._scopes: dict[tuple, Scope] = {}
        self._lookbacks: dict[tuple, timedelta] = {}
        self._partitions: dict[str, _Partition] = {}
        self._before: dict[str, tuple] = {}
        self._entries: dict[str, _Entry] = {}
        self._decisions: list[Decision] = []
        self._excluded: set[str] = set()
        self._false_positive: set[str] = set()
        self._rule_pairs = {pair: tuple((r.id, r.max_lag.total_seconds(), r.scope) for r in self.catalog.rules_for(*pair))
                            for pair in {(a, b) for a in self.catalog.modes for b in self.catalog.modes}}
        for decision in decisions:
            self._record_decision(decision)

    def _kinds_implied_by_same_pod(self) -> frozenset[str]:
        """"node"/"gpu" when every scope naming same_node/same_gpu also names same_pod."""
        scopes = [rule.scope for rule in self.catalog.rules] + [self.same_mode_scope, _TIGHT, *self._same_mode_scopes.values()]
        relation_of = {"node": "same_node", "gpu": "same_gpu"}
        return frozenset(kind for kind, relation in relation_of.items()
                         if all("same_pod" in scope for scope in scopes if relation in scope))

    def _scan_tables(self, later: str) -> tuple:
        """A scan's lookups for a `later` alert, in one read (see _Partition._process): they change
        only when a new failure mode gets a number."""
        found = self._tables.get(later)
        if found is None or len(found[0]) != len(_MODE_IDS):
            wide = self._wide_modes_for(later)
            reach = self._reach_by_later.get(later, min(self.tight_window, self.window))
            needs = self._needs_for(later)
            found = self._tables[later] = (self._windows_for(later), needs, self._apart_needs_for(later),
                                           self._local_rules_for(later), wide, [True] * len(_MODE_IDS), reach,
                                           self._tight_only_for(needs))
        return found

    @staticmethod
    def _tight_only_for(needs: list[tuple[float, bool, bool]]) -> list[bool]:
        """Per earlier mode's number: whether only one pod or one GPU can link it with the later
        mode (no rule either way, two modes): `_link` of such a pair on neither finds nothing."""
        return [need == (-1.0, False, False) for need in needs]

    def _windows_for(self, later: str) -> list[float]:
        """Per earlier mode's number, the widest gap to `later` (tight window for unknown pairs)."""
        found = self._window_lists.get(later)
        if found is None or len(found) != len(_MODE_IDS):
            gaps = self._pair_window_by_later.get(later)
            found = [self.tight_window] * len(_MODE_IDS)
            if gaps is not None:
                for mode, number in _MODE_IDS.items():
                    found[number] = gaps.get(mode, self.tight_window)
            self._window_lists[later] = found
        return found

    def _wide_modes_for(self, later: str) -> list[bool]:
        """Per earlier mode's number: whether it can link to `later` beyond one pod/GPU/node."""
        found = self._wide_modes.get(later)
        if found is None or len(found) != len(_MODE_IDS):
            found = [False] * len(_MODE_IDS)
            for mode, number in _MODE_IDS.items():
                rules = self._rule_pairs.get((mode, later), ()) + self._rule_pairs.get((later, mode), ())
                found[number] = (mode == later and self._same_trouble_beyond_local(later)) or any(scope - _LOCAL for _, _, scope in rules)
            self._wide_modes[later] = found
        return found

    def _needs_for(self, later: str) -> list[tuple[float, bool, bool]]:
        """Per earlier mode's number: (widest forward rule lag or -1, any backward rule, same mode)."""
        found = self._link_needs.get(later)
        if found is None or len(found) != len(_MODE_IDS):
            found = [(-1.0, False, False)] * len(_MODE_IDS)
            for mode, number in _MODE_IDS.items():
                forward = self._rule_pairs.get((mode, later), ())
                found[number] = (max((lag for _, lag, _ in forward), default=-1.0),
                                 bool(self._rule_pairs.get((later, mode), ())), mode == later)
            self._link_needs[later] = found
        return found

    def _apart_needs_for(self, later: str) -> list[tuple[float, bool, bool]]:
        """`_needs_for` for an earlier alert on another pod, GPU and node than `later`'s: only
        rules whose scope reaches beyond one pod/GPU/node can still link such a pair causally."""
        found = self._apart_needs.get(later)
        if found is None or len(found) != len(_MODE_IDS):
            found = [(-1.0, False, False)] * len(_MODE_IDS)
            for mode, number in _MODE_IDS.items():
                forward = [lag for _, lag, scope in self._rule_pairs.get((mode, later), ()) if scope - _LOCAL]
                backward = any(scope - _LOCAL for _, _, scope in self._rule_pairs.get((later, mode), ()))
                found[number] = (max(forward, default=-1.0), backward, mode == later and self._same_trouble_beyond_local(later))
            self._apart_needs[later] = found
        return found

    def _same_trouble_beyond_local(self, mode: str) -> bool:
        """Whether two alerts of `mode` can be one trouble on no common pod, GPU or node."""
        return bool(self._same_mode_scopes.get(mode, self.same_mode_scope) - _LOCAL)

    def _local_rules_for(self, later: str) -> list[bool]:
        """Per earlier mode's number: whether some rule linking it with `later` needs one pod,
        GPU or node (so `_apart_needs_for` asks less than `_needs_for`)."""
        found = self._local_rules.get(later)
        if found is None or len(found) != len(_MODE_IDS):
            needs, apart = self._needs_for(later), self._apart_needs_for(later)
            found = [needs[number] != apart[number] for number in range(len(_MODE_IDS))]
            self._local_rules[later] = found
        return found

    def _plans_for(self, later: str) -> list[tuple[tuple, tuple]]:
        """Per earlier mode's number: (rules earlier -> later, rules later -> earlier)."""
        found = self._link_plans.get(later)
        if found is None or len(found) != len(_MODE_IDS):
            found = [((), ())] * len(_MODE_IDS)
            for mode, number in _MODE_IDS.items():
                found[number] = (self._rule_pairs.get((mode, later), ()), self._rule_pairs.get((later, mode), ()))
            self._link_plans[later] = found
        return found

    def _pair_windows(self) -> dict[tuple[str, str], float]:
        """Per (earlier mode, later mode), the widest gap at which anything could still link them."""
        windows: dict[tuple[str, str], float] = {}
        for y in self.catalog.modes:
            for x in self.catalog.modes:
                reach = [self.tight_window]
                reach += [r.max_lag.total_seconds() for r in self.catalog.rules_for(y, x)]
                if x != y and self.catalog.rules_for(x, y):
                    reach.append(self.slack)
                if x == y:
                    reach.append(self.same_mode_window)
                windows[(y, x)] = max(reach)
        return windows

    # ---- input -------------------------------------------------------------------------------

    def add(self, alert: Alert) -> list[Incident]:
        return self.add_many([alert])

    def add_many(self, alerts: Iterable[Alert], *, rank_if: Callable[[str, int], bool] | None = None) -> list[Incident]:
        """Ingest alerts; returns the incidents they created or changed (members, edges or links).

        `rank_if(incident id, member count)` may hold back the ranking of a changed incident: it
        then comes back with its members only (no edges, chain or root candidates; `ranked` is
        False). A caller that writes a storm's incident of thousands of alerts after every few
        alerts ranks it every few seconds instead (`incident_of` ranks it whenever asked)."""
        alerts = list(alerts)
        before = self._before = {}  # replayed alerts whose incident may have changed -> its signature before
        keys = [occurrence_key(a.fingerprint, a.starts_at) for a in alerts]
        replayed = self._ingest(alerts, keys)
        new_keys = set(keys)
        changed = [e for e in replayed if e.key in new_keys
                   or (e.key in before and self._partitions[e.partition].signature(e) != before[e.key])]
        return self._incidents_touching(changed, rank_if)

    def decide(self, decision: Decision) -> list[Incident]:
        """Apply a human decision; returns the incidents it changed. Decisions are never undone."""
        touched = self._record_decision(decision)
        replayed: list[_Entry] = []
        for entry in touched:
            replayed.extend(self._partitions[entry.partition].ingest([], [entry]))
        keys = _decision_keys(decision)
        affected = replayed + [self._entries[k] for k in keys if k in self._entries]
        return self._incidents_touching(affected)

    def _record_decision(self, decision: Decision) -> list[_Entry]:
        self._decisions.append(decision)
        if isinstance(decision, FalsePositive):
            self._false_positive.add(decision.alert_key)
        if isinstance(decision, Exclude):
            self._excluded.add(decision.alert_key)
            entry = self._entries.get(decision.alert_key)
            if entry and not entry.excluded:
                entry.excluded = True
                return [entry]
        return []

    def _ingest(self, alerts: Iterable[Alert], keys: Sequence[str] | None = None) -> list[_Entry]:
        fresh: dict[str, list[_Entry]] = {}
        touched: dict[str, list[_Entry]] = {}
        for number, alert in enumerate(alerts):
            key = occurrence_key(alert.fingerprint, alert.starts_at) if keys is None else keys[number]
            known = self._entries.get(key)
            if known is not None:
                end_t = _end_time(alert)
                if end_t is not None and end_t != known.end_t:
                    known.end_t = end_t
                    known.alert = alert
                    known.own_keys = None
                    touched.setdefault(known.partition, []).append(known)
                continue
            entry = self._entry(alert, key)
            self._entries[key] = entry
            fresh.setdefault(entry.partition, []).append(entry)
        replayed: list[_Entry] = []
        for name in sorted(set(fresh) | set(touched)):
            partition = self._partitions.get(name)
            if partition is None:
                partition = self._partitions[name] = _Partition(name, self)
            replayed.extend(partition.ingest(fresh.get(name, []), touched.get(name, [])))
        return replayed

    def _entry(self, alert: Alert, key: str) -> _Entry:
        labels = alert.labels
        labels_key = tuple(labels.items())
        # Scope, lookback, classification and change kind all follow from the label set, rule
        # URL and annotations, so an alert like one seen before reuses the lot.
        class_key = (labels_key, alert.generator_url, tuple(alert.annotations.items()))
        prepared = self._prepared.get(class_key)
        if prepared is None:
            prepared = self._prepared[class_key] = self._prepare(alert, labels_key, class_key)
        scope, back, cls, change_kind, own_keys, own_scan = prepared
        starts_at = as_utc(alert.starts_at)
        onset = starts_at - back
        return _Entry(alert, key, cls, scope, _epoch(onset), _end_time(alert), scope.cluster, starts_at, onset,
                      change_kind, key in self._excluded, own_keys, own_scan)

    def _prepare(self, alert: Alert, labels_key: tuple, class_key: tuple) -> tuple:
        labels = alert.labels
        scope = self._scopes.get(labels_key)
        if scope is None:
            # scope_of never reads the alert name, so label sets differing only in it share a scope.
            shape = tuple(item for item in labels_key if item[0] != "alertname")
            scope = self._scope_shapes.get(shape)
            if scope is None:
                scope = self._scope_shapes[shape] = scope_of(labels)
            self._scopes[labels_key] = scope
        annotations_key = tuple(alert.annotations.items())
        timing_key = (alert.generator_url, annotations_key,
                      (labels.get("for", ""), labels.get("window", ""), labels.get("duration", "")))
        back = self._lookbacks.get(timing_key)
        if back is None:
            back = self._lookbacks[timing_key] = lookback(alert)
        if len(self._scopes) > 200_000:
            self._scopes.clear()
            self._lookbacks.clear()
            self._scope_shapes.clear()
            self._scope_keys.clear()
            self._prepared.clear()
        cls = self.classifier.classify(alert)  # cached there by what it reads
        own_keys, own_scan = self._keys_of(scope, alert.alertname)
        return (scope, back, cls, self._change_kind(alert) if cls.failure_mode == "change" else "", own_keys, own_scan)

    def _keys_of(self, scope: Scope, alertname: str) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
        """An alert's buckets (its scope's and its name's) and the ones its scan reads (not the name's)."""
        hit = self._scope_keys.get(id(scope))
        if hit is None:
            hit = self._scope_keys[id(scope)] = (_scope_keys(scope), scope)  # holding the scope keeps its id
        scan = hit[0]
        return (tuple(sorted(scan + (("name", alertname),))) if alertname else scan), scan

    def _change_kind(self, alert: Alert) -> str:
        labels = alert.labels
        text = " ".join([alert.annotations.get("summary", ""), alert.alertname] +
                        [labels.get(k, "") for k in ("change_type", "type", "class", "kind", "action")])
        return self.catalog.changes.kind_of(text)

    # ---- linking -----------------------------------------------------------------------------

    def link(self, y: _Entry, x: _Entry, y_nodes: frozenset[str], y_gpus: frozenset[str]) -> bool:
        """Whether earlier `y` and `x` belong together; causal edges found are kept on `x`.

        `y_nodes`/`y_gpus` are y's placement as known at x's time (links learned since count).
        """
        dt = x.t - y.t
        if dt > self._pair_window.get((y.mode, x.mode), self.tight_window):
            return False
        return bool(self._link(y, x, y_nodes, y_gpus, dt))

    def _link(self, y: _Entry, x: _Entry, y_nodes: frozenset[str], y_gpus: frozenset[str], dt: float) -> int:
        """link() once the pair's gap is known to be within its modes' widest gap.

        Returns what it kept on x: _FORWARD (edge y->x), _BACKWARD (edge x->y), _LINK (same
        trouble; recorded only within one mode, the only links ranking walks), or 0.
        """
        y_scope, x_scope = y.scope, x.scope
        x_nodes, x_gpus = x.nodes, x.gpus
        # relations() is a pure function of the two scopes and placements; pairs repeat a lot.
        # The cached value holds the scopes, so their ids in the key cannot be reused.
        rel_key = (id(y_scope), id(x_scope), y_nodes, x_nodes, y_gpus, x_gpus)
        hit = self._relations_cache.get(rel_key)
        if hit is None:
            if len(self._relations_cache) > 500_000:
                self._relations_cache.clear()
            rel = relations(y_scope, x_scope, y_nodes, x_nodes, y_gpus, x_gpus)
            self._relations_cache[rel_key] = (rel, y_scope, x_scope)
        else:
            rel = hit[0]
        plan_key = (rel, y.mode_id, x.mode_id)
        plan = self._pair_plans.get(plan_key)
        if plan is None:
            plan = self._pair_plans[plan_key] = self._pair_plan(rel, y, x)
        back_same, forwards, back_slack, same_mode, tight, same = plan
        if back_same is not None and x.cls.depth > y.cls.depth and dt <= self.reorder:
            x.edges.append(_edge(x, y, back_same[0], -dt, back_same[1]))
            return _BACKWARD
        for rule_id, max_lag, relation in forwards:
            if dt <= max_lag:
                x.edges.append(_edge(y, x, rule_id, dt, relation))
                return _FORWARD
        if back_slack is not None and dt <= self.slack:
            x.edges.append(_edge(x, y, back_slack[0], -dt, back_slack[1]))
            return _BACKWARD
        if same_mode and dt <= self.same_mode_window:
            if x.mode != "other" or x.alert.labels.get("alertname", "") == y.alert.labels.get("alertname", ""):  # Alert.alertname
                x.links.append(y)
                return _LINK
        if tight and dt <= self.tight_window:
            if same:
                x.links.append(y)
            return _LINK
        return 0

    def _pair_plan(self, rel: frozenset[str], y: _Entry, x: _Entry) -> tuple:
        """What _link() can find for two modes on scopes related by `rel`, in the order it tries.

        (backward rule and relation within one mode, forward rules meeting `rel` with their lag
        and relation, backward rule across modes, a same-trouble link, a tight-scope link, same
        mode). A pair of modes on one relation set repeats all through a storm, and most such
        pairs can record nothing at all: the plan answers without walking the rules again.
        """
        forward, backward = self._plans_for(x.mode)[y.mode_id]
        same = x.mode == y.mode
        back = next(((rule_id, _tightest(scope & rel)) for rule_id, _, scope in backward if scope & rel), None)
        forwards = tuple((rule_id, max_lag, _tightest(scope & rel)) for rule_id, max_lag, scope in forward if scope & rel)
        same_trouble = same and bool(rel & self._same_mode_scopes.get(x.mode, self.same_mode_scope))
        return (back if same else None, forwards, None if same else back, same_trouble,
                bool(rel & _TIGHT), same)

    def link_change(self, change: _Entry, x: _Entry) -> bool:
        dt = x.t - change.t
        if change.change_kind == "rule_edit":
            return self._link_rule_edit(change, x, dt)
        if dt < 0 or dt > self.change_window:
            return False
        rel = relations(change.scope, x.scope, change.nodes, x.nodes, change.gpus, x.gpus)
        if not in_change_scope(change.scope, x.scope, x.nodes, rel):
            return False
        for rule_id, max_lag, _ in self._rule_pairs.get(("change", x.mode), ()):
            if dt <= max_lag:
                x.edges.append(_edge(change, x, rule_id, dt, "in_change_scope"))
                return True
        return False

    def _link_rule_edit(self, edit: _Entry, x: _Entry, dt: float) -> bool:
        """A rule edit belongs with the alert it edits; it caused it only if that fired at once."""
        if dt < -self.slack or dt > self.rule_edit_window or not self.rule_edit_covers(edit, x):
            return False
        if dt <= self.rule_edit_causal:
            x.edges.append(_edge(edit, x, "rule_edit->same_alert", dt, "same_alertname"))
        return True

    def rule_edit_covers(self, edit: _Entry, x: _Entry) -> bool:
        """The edited rule's alert, in the namespace and workload the edit names (when it names them)."""
        if x.alert.alertname != edit.alert.alertname or x.mode == "change":
            return False
        if edit.scope.namespace and x.scope.namespace and edit.scope.namespace != x.scope.namespace:
            return False
        if edit.scope.deployment or edit.scope.model or edit.scope.route or edit.scope.pod:
            rel = relations(edit.scope, x.scope, edit.nodes, x.nodes, edit.gpus, x.gpus)
            return in_change_scope(edit.scope, x.scope, x.nodes, rel)
        return True

    def is_open(self, agg: list, t: float) -> bool:
        start, last, unresolved, last_end = agg[0], agg[1], agg[2], agg[3]
        if t - start > self.max_span or t - last > self.max_idle:
            return False
        return not (unresolved == 0 and t > last_end + self.quiet)

    # ---- output ------------------------------------------------------------------------------

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

    def _incidents_touching(self, entries: Sequence[_Entry],
                            rank_if: Callable[[str, int], bool] | None = None) -> list[Incident]:
        if any(isinstance(d, (Merge, Split)) for d in self._decisions):
            groups = self._final_groups(entries)
        else:
            groups = self._automatic_groups(entries)
        # A group's id is its earliest member's key (see _build); groups come sorted.
        built = [self._build(members) if rank_if is None or rank_if(members[0].key, len(members))
                 else self._build_unranked(members) for members in groups]
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
        merges: list[tuple[str, ...]] = []
        for number, decision in enumerate(self._decisions):
            if isinstance(decision, Split):
                for key in decision.alert_keys:
                    pins[key] = number
            elif isinstance(decision, Merge):
                merges.append(decision.alert_keys)

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

        for keys in merges:
            live = [self._entries[k] for k in keys if k in self._entries and not self._entries[k].excluded]
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
            return [self._entries[k] for k, n in pins.items()
                    if n == gid[1] and k in self._entries and not self._entries[k].excluded]
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
        graph = numbered_edges([record[0].number for record in records], [record[1].number for record in records],
                               [record[3] for record in records], lambda n: records[n][5] or _made_edge(records[n]))
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
            id=entries[0].key, members=tuple(members), edges=(), chain=(), root_candidates=(),
            started_at=min([m.starts_at for m in members]), ended_at=_ended_at(members), ranked=False,
        )

    def _members(self, entries: list[_Entry]) -> list[Member]:
        """_member() of each, its cache read inline (big incidents are rebuilt on every update)."""
        if self._false_positive:
            return [self._member(e) for e in entries]
        # No alert is flagged, so no cached member is either: it holds while its end is the same.
        return [e.member if e.member is not None and e.member_end == e.end_t else self._member(e) for e in entries]

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
        # A frozen dataclass's __init__ sets each field through object.__setattr__; filling the
        # instance dict directly (fields in declaration order) gives an equal object 4x faster.
        member = object.__new__(Member)
        member.__dict__.update(
            key=entry.key, fingerprint=alert.fingerprint, alertname=alert.labels.get("alertname", ""),
            starts_at=entry.starts_at, onset=entry.onset, ends_at=_end_datetime(entry), layer=cls.layer,
            failure_mode=cls.failure_mode, classified_by=cls.source, scope=entry.scope, false_positive=flagged,
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
    return datetime.fromtimestamp(entry.end_t, tz=timezone.utc)


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
    if end.year <= 1:
        return None
    return _epoch(end)


def _decision_keys(decision: Decision) -> tuple[str, ...]:
    if isinstance(decision, (Merge, Split)):
        return decision.alert_keys
    return (decision.alert_key,)
