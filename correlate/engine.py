"""Grouping alerts into incidents, incrementally and in batch, with identical results.

Alerts are processed in event-time order (onset, then occurrence key), each compared with the
few earlier neighbours that share a scope key within the widest rule lag. An alert joins every
open incident it links to (merging them) or opens a new one. Because the outcome is a function
of that order only, an alert arriving late rolls its cluster back to where it belongs and
replays what follows; the same set of alerts therefore gives the same incidents in any arrival
order. Clusters are independent, so a late alert replays only its own cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta

from correlate.assembly import _Assembly, _decision_keys
from correlate.catalog import Catalog, load_catalog
from correlate.classify import Classifier
from correlate.entries import (
    _TIGHT,
    _end_time,
    _Entry,
    _epoch,
    _scope_keys,
)
from correlate.events import Alert, occurrence_key
from correlate.linking import _LinkRules
from correlate.partition import _Partition
from correlate.results import (
    Decision,
    Exclude,
    FalsePositive,
    Incident,
)
from correlate.scope import (
    Scope,
    scope_of,
)
from correlate.timing import as_utc, lookback

__all__ = ["Correlator"]


class Correlator(_LinkRules, _Assembly):
    """Holds alerts and human decisions; answers with incidents, one alert at a time or in bulk.

    `add(alert)` returns the incidents that alert changed (its own, and any rebuilt by a late
    arrival); `incidents()` returns them all. Feeding the same alerts in any order, one by one
    or at once, gives the same incidents.
    """

    def __init__(self, catalog: Catalog | None = None, decisions: Iterable[Decision] = ()) -> None:
        # What the linking and assembly halves read is declared, with its type, on them
        # (linking._LinkRules, assembly._Assembly).
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
        self._same_mode_scopes = {
            name: info.same_mode_scope if info.same_mode_scope is not None else self.same_mode_scope
            for name, info in self.catalog.modes.items()
        }
        self.quiet = settings.quiet_after_resolve.total_seconds()
        self.max_idle = settings.max_idle.total_seconds()
        self.max_span = settings.max_span.total_seconds()
        change_rules = [r for r in self.catalog.rules if r.cause == "change"]
        other_lags = [r.max_lag.total_seconds() for r in self.catalog.rules if r.cause != "change"]
        self.window = max(other_lags + [self.same_mode_window, self.tight_window]) + self.slack
        self.change_window = max((r.max_lag.total_seconds() for r in change_rules), default=0.0)
        self._pair_window = self._pair_windows()
        self._pair_window_by_later = {}
        for (earlier, later), gap in self._pair_window.items():
            self._pair_window_by_later.setdefault(later, {})[earlier] = gap
        self._reach_by_later = {
            later: min(
                self.window,
                max([self.tight_window] + [gap for earlier, gap in gaps.items() if earlier != "change"]),
            )
            for later, gaps in self._pair_window_by_later.items()
        }
        self.implied_by_same_pod = self._kinds_implied_by_same_pod()
        self.scan_stamp = 0
        self._relations_cache = {}
        self._prepared: dict[tuple, tuple] = {}
        self._window_lists = {}
        self._tables = {}
        self._scope_keys: dict[int, tuple] = {}  # scope id -> (its sorted bucket keys, the scope)
        self._link_plans = {}
        self._pair_plans = {}  # (relations, earlier mode id, later mode id) -> _pair_plan()
        self._link_needs = {}
        self._apart_needs = {}
        self._local_rules = {}
        self._wide_modes = {}
        self._scope_shapes: dict[tuple, Scope] = {}
        self._scopes: dict[tuple, Scope] = {}
        self._lookbacks: dict[tuple, timedelta] = {}
        # Matchers whose alerts show their condition late (catalog `onset_lead`), by matcher id.
        self._onset_leads = {m.id: m.onset_lead for m in self.catalog.matchers if m.onset_lead}
        self._partitions = {}
        self.signatures_before: dict[str, tuple] = {}
        self._entries = {}
        self._decisions = []
        self._excluded = set()
        self._false_positive = set()
        self.rule_pairs = {
            pair: tuple((r.id, r.max_lag.total_seconds(), r.scope) for r in self.catalog.rules_for(*pair))
            for pair in {(a, b) for a in self.catalog.modes for b in self.catalog.modes}
        }
        # `unplaced` rules: their causes' node/GPU-level alerts join their cluster's fault bucket,
        # which a pod alert of an effect mode placed nowhere reads back this far.
        self.unplaced_reach = {}
        causes = set()
        for (cause, effect), plans in self.rule_pairs.items():
            for _, lag, scope in plans:
                if "unplaced" in scope and "change" not in (cause, effect):
                    causes.add(cause)
                    self.unplaced_reach[effect] = max(lag, self.unplaced_reach.get(effect, 0.0))
        self.unplaced_causes = frozenset(causes)
        for decision in decisions:
            self._record_decision(decision)

    def _kinds_implied_by_same_pod(self) -> frozenset[str]:
        """ "node"/"gpu" when every scope naming same_node/same_gpu also names same_pod."""
        scopes = [rule.scope for rule in self.catalog.rules] + [
            self.same_mode_scope,
            _TIGHT,
            *self._same_mode_scopes.values(),
        ]
        relation_of = {"node": "same_node", "gpu": "same_gpu"}
        return frozenset(
            kind
            for kind, relation in relation_of.items()
            if all("same_pod" in scope for scope in scopes if relation in scope)
        )

    def add(self, alert: Alert) -> list[Incident]:
        return self.add_many([alert])

    def add_many(
        self, alerts: Iterable[Alert], *, rank_if: Callable[[str, int], bool] | None = None
    ) -> list[Incident]:
        """Ingest alerts; returns the incidents they created or changed (members, edges or links).

        `rank_if(incident id, member count)` may hold back the ranking of a changed incident: it
        then comes back with its members only (no edges, chain or root candidates; `ranked` is
        False). A caller that writes a storm's incident of thousands of alerts after every few
        alerts ranks it every few seconds instead (`incident_of` ranks it whenever asked)."""
        alerts = list(alerts)
        before = (
            self.signatures_before
        ) = {}  # replayed alerts whose incident may have changed -> its signature before
        keys = [occurrence_key(a.fingerprint, a.starts_at) for a in alerts]
        replayed = self._ingest(alerts, keys)
        new_keys = set(keys)
        changed = [
            e
            for e in replayed
            if e.key in new_keys
            or (e.key in before and self._partitions[e.partition].signature(e) != before[e.key])
        ]
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
        scope, back, cls, change_kind, own_keys, own_scan, unplaced = prepared
        starts_at = as_utc(alert.starts_at)
        onset = starts_at - back
        return _Entry(
            alert,
            key,
            cls,
            scope,
            _epoch(onset),
            _end_time(alert),
            scope.cluster,
            starts_at,
            onset,
            change_kind,
            key in self._excluded,
            own_keys,
            own_scan,
            unplaced,
        )

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
        timing_key = (
            alert.generator_url,
            annotations_key,
            (labels.get("for", ""), labels.get("window", ""), labels.get("duration", "")),
        )
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
        if self._onset_leads and ":" in cls.source and not cls.source.startswith("labels-over:"):
            back = back + self._onset_leads.get(cls.source.rpartition(":")[2], timedelta(0))
        own_keys, own_scan = self.keys_of(scope, alert.alertname)
        mode = cls.failure_mode
        if scope.pod:
            unplaced = 2 if mode in self.unplaced_reach and mode != "change" else 0
        else:
            unplaced = 1 if mode in self.unplaced_causes and (scope.node or scope.gpus) else 0
        return (
            scope,
            back,
            cls,
            self._change_kind(alert) if mode == "change" else "",
            own_keys,
            own_scan,
            unplaced,
        )

    def keys_of(
        self, scope: Scope, alertname: str
    ) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
        """An alert's buckets (its scope's and its name's) and the ones its scan reads (not the name's)."""
        hit = self._scope_keys.get(id(scope))
        if hit is None:
            hit = self._scope_keys[id(scope)] = (_scope_keys(scope), scope)  # holding the scope keeps its id
        scan = hit[0]
        return (tuple(sorted(scan + (("name", alertname),))) if alertname else scan), scan

    def _change_kind(self, alert: Alert) -> str:
        labels = alert.labels
        text = " ".join(
            [alert.annotations.get("summary", ""), alert.alertname]
            + [labels.get(k, "") for k in ("change_type", "type", "class", "kind", "action")]
        )
        return self.catalog.changes.kind_of(text)

    # ---- linking -----------------------------------------------------------------------------
