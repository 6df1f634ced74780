"""The pair-linking rules of the engine: which earlier alert a new one links to, by which causal
rule or same-trouble link, with the tables derived from the catalog that make a scan cheap
(windows, wide modes, local-only rules, each pair's window). `Correlator` inherits them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from correlate.entries import (
    _BACKWARD,
    _FORWARD,
    _LINK,
    _LOCAL,
    _MODE_IDS,
    _TIGHT,
    _UNPLACED,
    _edge,
    _Entry,
    _tightest,
)
from correlate.topology import (
    in_change_scope,
    relations,
)

if TYPE_CHECKING:
    from correlate.catalog import Catalog
    from correlate.partition import _Partition

# A rule as the linking tables hold it: (rule id, max lag in seconds, scope relations).
_RulePlan = tuple[str, float, frozenset[str]]
# Per earlier mode's number: (widest forward rule lag or -1, any backward rule, same mode).
_Need = tuple[float, bool, bool]
# What `scan_tables` answers, in its order (see there).
_ScanTables = tuple[
    list[float], list[_Need], list[_Need], list[bool], list[bool], list[bool], float, list[bool]
]


class _LinkRules:
    """The linking half of `Correlator`, which sets the settings and tables below in its __init__."""

    catalog: Catalog
    slack: float
    same_mode_window: float
    tight_window: float
    reorder: float
    rule_edit_window: float
    rule_edit_causal: float
    quiet: float
    max_idle: float
    max_span: float
    window: float
    change_window: float
    same_mode_scope: frozenset[str]
    _same_mode_scopes: dict[str, frozenset[str]]
    rule_pairs: dict[tuple[str, str], tuple[_RulePlan, ...]]
    _pair_window: dict[tuple[str, str], float]
    _pair_window_by_later: dict[str, dict[str, float]]
    _reach_by_later: dict[str, float]
    _relations_cache: dict[tuple, tuple]
    _window_lists: dict[str, list[float]]
    _tables: dict[str, _ScanTables]
    _link_plans: dict[str, list[tuple[tuple[_RulePlan, ...], tuple[_RulePlan, ...]]]]
    _pair_plans: dict[tuple, tuple]  # (relations, earlier mode id, later mode id) -> _pair_plan()
    _link_needs: dict[str, list[_Need]]
    _apart_needs: dict[str, list[_Need]]
    _local_rules: dict[str, list[bool]]
    _wide_modes: dict[str, list[bool]]
    _partitions: dict[str, _Partition]
    # `unplaced` rules: the modes they start from, and per effect mode the widest lag of one.
    unplaced_causes: frozenset[str]
    unplaced_reach: dict[str, float]

    def scan_tables(self, later: str) -> _ScanTables:
        """A scan's lookups for a `later` alert, in one read (see _Partition._process): they change
        only when a new failure mode gets a number."""
        found = self._tables.get(later)
        if found is None or len(found[0]) != len(_MODE_IDS):
            wide = self._wide_modes_for(later)
            reach = self._reach_by_later.get(later, min(self.tight_window, self.window))
            needs = self._needs_for(later)
            found = self._tables[later] = (
                self._windows_for(later),
                needs,
                self._apart_needs_for(later),
                self._local_rules_for(later),
                wide,
                [True] * len(_MODE_IDS),
                reach,
                self._tight_only_for(needs),
            )
        return found

    @staticmethod
    def _tight_only_for(needs: list[_Need]) -> list[bool]:
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
                rules = self.rule_pairs.get((mode, later), ()) + self.rule_pairs.get((later, mode), ())
                # (Not `unplaced`: the fault bucket finds those pairs, not a workload's buckets.)
                found[number] = (mode == later and self._same_trouble_beyond_local(later)) or any(
                    scope - _LOCAL - _UNPLACED for _, _, scope in rules
                )
            self._wide_modes[later] = found
        return found

    def _needs_for(self, later: str) -> list[_Need]:
        """Per earlier mode's number: (widest forward rule lag or -1, any backward rule, same mode)."""
        found = self._link_needs.get(later)
        if found is None or len(found) != len(_MODE_IDS):
            found = [(-1.0, False, False)] * len(_MODE_IDS)
            for mode, number in _MODE_IDS.items():
                forward = self.rule_pairs.get((mode, later), ())
                found[number] = (
                    max((lag for _, lag, _ in forward), default=-1.0),
                    bool(self.rule_pairs.get((later, mode), ())),
                    mode == later,
                )
            self._link_needs[later] = found
        return found

    def _apart_needs_for(self, later: str) -> list[_Need]:
        """`_needs_for` for an earlier alert on another pod, GPU and node than `later`'s: only
        rules whose scope reaches beyond one pod/GPU/node can still link such a pair causally."""
        found = self._apart_needs.get(later)
        if found is None or len(found) != len(_MODE_IDS):
            found = [(-1.0, False, False)] * len(_MODE_IDS)
            for mode, number in _MODE_IDS.items():
                forward = [lag for _, lag, scope in self.rule_pairs.get((mode, later), ()) if scope - _LOCAL]
                backward = any(
                    scope - _LOCAL - _UNPLACED for _, _, scope in self.rule_pairs.get((later, mode), ())
                )
                found[number] = (
                    max(forward, default=-1.0),
                    backward,
                    mode == later and self._same_trouble_beyond_local(later),
                )
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

    def _plans_for(self, later: str) -> list[tuple[tuple[_RulePlan, ...], tuple[_RulePlan, ...]]]:
        """Per earlier mode's number: (rules earlier -> later, rules later -> earlier)."""
        found = self._link_plans.get(later)
        if found is None or len(found) != len(_MODE_IDS):
            found = [((), ())] * len(_MODE_IDS)
            for mode, number in _MODE_IDS.items():
                found[number] = (
                    self.rule_pairs.get((mode, later), ()),
                    self.rule_pairs.get((later, mode), ()),
                )
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

    def link(self, y: _Entry, x: _Entry, y_nodes: frozenset[str], y_gpus: frozenset[str]) -> bool:
        """Whether earlier `y` and `x` belong together; causal edges found are kept on `x`.

        `y_nodes`/`y_gpus` are y's placement as known at x's time (links learned since count).
        """
        dt = x.t - y.t
        if dt > self._pair_window.get((y.mode, x.mode), self.tight_window):
            return False
        return bool(self.link_pair(y, x, y_nodes, y_gpus, dt))

    def link_pair(
        self, y: _Entry, x: _Entry, y_nodes: frozenset[str], y_gpus: frozenset[str], dt: float
    ) -> int:
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
        back_same, forwards, back_slack, same_mode, tight, same, placed_forwards = plan
        if placed_forwards is not None and self.pods_known_at_fault(y, x, y_nodes, y_gpus):
            forwards = placed_forwards  # the topology sees pods on that node/GPU: not this one
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
            if x.mode != "other" or x.alert.labels.get("alertname", "") == y.alert.labels.get(
                "alertname", ""
            ):  # Alert.alertname
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
        # Never backwards through `unplaced`: resting on timing alone, such a link takes no
        # onset slack (the effect starts at or after its cause).
        back_rel = rel - _UNPLACED
        back = next(
            ((rule_id, _tightest(scope & back_rel)) for rule_id, _, scope in backward if scope & back_rel),
            None,
        )
        forwards = tuple(
            (rule_id, max_lag, _tightest(scope & rel)) for rule_id, max_lag, scope in forward if scope & rel
        )
        same_trouble = same and bool(rel & self._same_mode_scopes.get(x.mode, self.same_mode_scope))
        placed = None
        if "unplaced" in rel:  # the forward rules left when the fault's node/GPU has known pods
            placed = tuple(
                (rule_id, max_lag, _tightest(scope & rel - _UNPLACED))
                for rule_id, max_lag, scope in forward
                if scope & rel - _UNPLACED
            )
        return (
            back if same else None,
            forwards,
            None if same else back,
            same_trouble,
            bool(rel & _TIGHT),
            same,
            placed,
        )

    def pods_known_at_fault(
        self, y: _Entry, x: _Entry, y_nodes: frozenset[str], y_gpus: frozenset[str]
    ) -> bool:
        """Whether the topology knows pods on the node/GPU of the fault of an `unplaced` pair at
        the later alert's time: the fault then reaches the pods running there through them
        (same_node, same_gpu), and a pod it cannot place is taken to run elsewhere (alerts that
        place pods do exist for that node; the pod is of a kind they do not cover)."""
        nodes, gpus = (x.nodes, x.gpus) if y.scope.pod else (y_nodes, y_gpus)
        topology = self._partitions[x.partition].topology
        return any(topology.pods_on("node", node, x.t) for node in nodes) or any(
            topology.pods_on("gpu", gpu, x.t) for gpu in gpus
        )

    def link_change(self, change: _Entry, x: _Entry) -> bool:
        dt = x.t - change.t
        if change.change_kind == "rule_edit":
            return self._link_rule_edit(change, x, dt)
        if dt < 0 or dt > self.change_window:
            return False
        rel = relations(change.scope, x.scope, change.nodes, x.nodes, change.gpus, x.gpus)
        if not in_change_scope(change.scope, x.scope, x.nodes, rel):
            return False
        for rule_id, max_lag, _ in self.rule_pairs.get(("change", x.mode), ()):
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
