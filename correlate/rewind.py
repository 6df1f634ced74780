"""A late alert's replay: a cluster rolls back to where the alert belongs and replays what
follows, linking again only what the new alert can change (`_Rewind`, the partition's undo,
unindex and relink; `_Replay`, which entries must be linked again)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from itertools import islice
from typing import TYPE_CHECKING

from correlate.entries import _FAULTS, _WIDE_KEYS, _Entry, _ModeList, _sort_key

if TYPE_CHECKING:
    from correlate.engine import Correlator
    from correlate.topology import Topology


_STORM_GROUP = 256  # a partial replay tainting a group this big links everything after again


class _Rewind:
    """The rollback half of `_Partition` (correlate/partition.py): undoing entries from a point
    in event time and deciding what must be linked again.

    It works on the partition's state and calls back into its linking, declared here as
    `_Partition` sets and defines them."""

    engine: Correlator
    entries: list[_Entry]
    sort_keys: list[tuple[float, str]]
    index: dict[tuple[str, str], list[_Entry]]
    by_mode: dict[tuple[str, str], dict[int, _ModeList]]
    pod_node: dict[tuple[str, str], str]
    changes: list[_Entry]
    topology: Topology
    parent: dict[str, str]
    size: dict[str, int]
    agg: dict[str, list]

    if TYPE_CHECKING:

        def find(self, key: str) -> str: ...
        def _place(self, x: _Entry) -> None: ...
        def _process(self, x: _Entry) -> None: ...
        def _index(self, x: _Entry, keys: Sequence[tuple[str, str]]) -> None: ...
        def _scan_keys_now(self, x: _Entry) -> Sequence[tuple[str, str]]: ...

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
        if self._fault_near(kind, value, since):
            # Pods known on a fault's node/GPU end its `unplaced` links (Correlator.pods_known_at_fault)
            # for every alert from `since` on, whichever pod it is on.
            return bisect.bisect_left(self.sort_keys, (since, ""))
        if self._link_changes_nothing(pod, kind, value, since):
            return first
        buckets = [("pod", pod), (kind, value)] + [
            ("pod", other) for other in self.topology.pods_on(kind, value, float("inf"))
        ]
        for index_key in buckets:
            bucket = self.index.get(index_key)
            if bucket:
                at = bisect.bisect_left(bucket, since, key=lambda e: e.t)
                if at < len(bucket):
                    first = min(first, bisect.bisect_left(self.sort_keys, bucket[at].sort_key))
        return first

    def _fault_near(self, kind: str, value: str, since: float) -> bool:
        """Whether a fault on that node/GPU in the fault bucket can meet a pod placed nowhere
        from `since` on (within the widest `unplaced` rule's lag before it)."""
        faults = self.index.get(_FAULTS)
        if not faults:
            return False
        horizon = since - max(self.engine.unplaced_reach.values())
        for entry in reversed(faults):
            if entry.t < horizon:
                break
            if value in (entry.nodes if kind == "node" else entry.gpus):
                return True
        return False

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
        if kind not in self.engine.implied_by_same_pod or len(namespaces - {""}) > 1:
            return False
        for entry in reversed(bucket):
            if entry.t < valid_from:
                break
            if entry.unplaced == 2 and not entry.nodes and not entry.gpus:
                return False  # placed now, it no longer meets the faults `unplaced` rules read
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
            entry.nodes, entry.gpus = (
                self.topology.nodes(entry.scope, entry.t),
                self.topology.gpus(entry.scope, entry.t),
            )
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
            x.own_keys, x.own_scan = self.engine.keys_of(x.scope, x.alert.alertname)
            keys = x.own_keys
        reads = set(x.index_keys).union(keys)
        if x.unplaced == 1:
            reads.add(_FAULTS)  # it joins the fault bucket too (see `_process`)
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
                del same_mode.sources[bisect.bisect_left(same_mode.sources, at) :]
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
    signature from before the rollback noted in `Correlator.signatures_before` for `add_many` to compare.
    """

    __slots__ = (
        "partition",
        "repeatable",
        "old_root",
        "old_members",
        "old_groups",
        "tainted",
        "hot",
        "tainted_upto",
        "change_reach",
        "relink_all",
        "before",
        "cut",
    )

    def __init__(self, partition: _Rewind, suffix: list[_Entry], touched: list[_Entry]) -> None:
        self.partition = partition
        engine = partition.engine
        self.before = engine.signatures_before
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
        self.cut: set[tuple[str, str]] = (
            set()
        )  # buckets cut back to a re-linked alert's place (see _rollback_groups)
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
            if entry.unplaced == 1:
                self.hot.add(_FAULTS)
