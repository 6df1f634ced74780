"""One cluster's alerts in event-time order: the neighbour index, the scan that links each new
alert to the few earlier ones sharing a scope key within a rule's lag, and the incident forest
(union-find). Its rollback for late alerts is `correlate/rewind.py`."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING

from correlate.entries import (
    _BACKWARD,
    _DENSE,
    _FAULTS,
    _FORWARD,
    _LINK,
    _MAX_LOOKBACK_SECONDS,
    _UNKEPT,
    _WIDE_KEYS,
    _edge,
    _Entry,
    _epoch,
    _Kept,
    _kin_root,
    _ModeList,
    _sort_key,
)
from correlate.rewind import _absorb, _Rewind
from correlate.topology import (
    Topology,
    in_change_scope,
    relations,
)

if TYPE_CHECKING:
    from correlate.engine import Correlator


class _Partition(_Rewind):
    """One cluster's alerts in event-time order, its neighbour index and its incident forest."""

    def __init__(self, name: str, engine: Correlator) -> None:
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
        self._scan_keys_cache: dict[
            tuple, tuple
        ] = {}  # (scope id, nodes, GPUs) -> scan keys and when they hold

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
            before = self.engine.signatures_before
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
            x.own_keys, x.own_scan = engine.keys_of(x.scope, x.alert.alertname)
            keys = x.own_keys
        if x.unplaced == 1:
            keys = keys + (_FAULTS,)  # a fault that pods placed nowhere may follow
        linked: set[str] = set()
        x_t = x.t
        x_mode = x.mode
        # Per earlier mode's number: the widest gap to x's mode, what a pair could still add (on
        # any scopes, and on no common pod/GPU/node), whether the two differ, and whether the mode
        # can link to x's beyond one pod/GPU/node; and the scan's reach back in time.
        windows, needs, apart_needs, local_only, wide_mode, all_modes, reach, tight_only = engine.scan_tables(
            x_mode
        )
        # Indexed alerts are never changes, so no earlier alert beyond the widest gap any
        # non-change mode has to x's mode can link (link() checks that gap first).
        horizon = x_t - reach
        engine.scan_stamp += 1
        stamp = engine.scan_stamp
        index, by_mode, pod_node = self.index, self.by_mode, self.pod_node
        pod_nodes, pod_gpus = topology.pod_nodes, topology.pod_gpus
        pod_versions = topology.pod_versions
        link = engine.link_pair  # the gap was checked just above
        x_nodes, x_gpus = x.nodes, x.gpus
        x_placed = bool(x_nodes or x_gpus)  # else no pair can share a node or GPU
        x_group = x.scope.group or None
        kept = _Kept(x, self)
        marks = kept.marks
        reorder, slack, x_depth = engine.reorder, engine.slack, x.cls.depth
        read_runs: dict[tuple[int, int], _ModeList] = {}
        scan_keys = x.scan_keys = self._scan_keys(x, x.own_scan) if x_mode != "change" else ()
        x.scan_version = topology.version
        for index_key in scan_keys:
            bucket = index.get(index_key)
            if not bucket:
                continue
            # The fault bucket, only as far back as x's mode has an `unplaced` rule into it.
            stop = horizon if index_key is not _FAULTS else x_t - engine.unplaced_reach[x_mode]
            if index_key[0] == "pod":
                node = pod_node[index_key]
                if node and ("node", node) in scan_keys:
                    # Every alert in it is in that node's bucket too, read before it (the keys are
                    # sorted) under the same checks: each was compared there, or passed over for
                    # its mode or its gap, as it would be here. In a storm, a large share of all reads.
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
                    if y_t < stop:
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
                                    # `starts` is set only for a _ModeList run (its type is checked
                                    # once per run, above, not once per alert here).
                                    sources = run.sources  # type: ignore[attr-defined]
                                    newest = bisect.bisect_left(sources, at) - 1
                                    if newest >= 0 and sources[newest] >= start:
                                        start = sources[newest] + 1
                                if at > start and (
                                    not apart
                                    or not x_placed
                                    and self._pod_quiet(x_pod, y.mode_id, run[start].t, y_t)
                                ):
                                    # The reverse list iterator's state is the index it yields
                                    # next: setting it passes the run in one step, not one by one.
                                    # (A list_reverseiterator method typeshed's `reversed` lacks.)
                                    newest_first.__setstate__(start - 1)  # type: ignore[attr-defined]
                            continue
                    if not placed:  # _placement_at(y, x_t), inline: it runs for every neighbour compared
                        pod = y.scope.pod
                        if pod and (pod in pod_nodes or pod in pod_gpus):  # topology.knows(pod)
                            cached = y.placement  # _placement's cache, read inline on its fast path
                            if (
                                cached is not None
                                and x_t >= cached[1]
                                and cached[0] == pod_versions.get(pod, 0)
                            ):
                                y_nodes, y_gpus = cached[2], cached[3]
                            else:
                                y_nodes, y_gpus = self._placement(y, x_t)
                        else:
                            y_nodes, y_gpus = y.nodes, y.gpus
                    if (
                        tight_only[y.mode_id]
                        and y.scope.pod != x_pod
                        and (not y_gpus or not x_gpus or y_gpus.isdisjoint(x_gpus))
                    ):
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

    def _index(self, x: _Entry, keys: Sequence[tuple[str, str]]) -> None:
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
    def _unread_runs(
        modes: dict[int, _ModeList], readable: list[bool], read_runs: dict[tuple[int, int], _ModeList]
    ) -> list[_ModeList]:
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
                times = sorted(
                    {
                        t
                        for table in (topology.pod_nodes, topology.pod_gpus)
                        for t in table.get(pod, {}).values()
                    }
                )
                cached = (
                    version,
                    topology.latest_since(pod),
                    topology.nodes(y.scope, float("inf")),
                    topology.gpus(y.scope, float("inf")),
                    times,
                    {},
                    y.scope,
                )
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
        rules = engine.rule_pairs
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
                rule = next(
                    (rule_id for rule_id, max_lag, _ in rules.get(("change", y.mode), ()) if lag <= max_lag),
                    None,
                )
                if rule is not None:
                    change.edges.append(_edge(change, y, rule, lag, "in_change_scope"))
                    found[id(y)] = y
        return list(found.values())

    def _scan_keys_now(self, x: _Entry) -> Sequence[tuple[str, str]]:
        """`_scan_keys` of x as placed: those its last scan read, while its placement stamp is
        the same (no link of its pod, nor of the pods on its nodes/GPUs, changed since)."""
        if not x.nodes and not x.gpus:
            return x.own_scan + (_FAULTS,) if x.unplaced == 2 else x.own_scan  # as _scan_keys answers
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
        if not x.nodes and not x.gpus:  # placed nowhere: a pod alert of an `unplaced` effect reads the faults
            return own + (_FAULTS,) if x.unplaced == 2 else own
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
