"""Root candidates, the cause-to-effect chain and the explanation of one incident.

The root is the causal source, not the earliest alert: a slow rule over a wide window fires
last yet may be the cause, and an unrelated alert that happened to fire first explains nothing.
So candidates are ranked by how much of the incident they explain through causal edges, then
by how deep their failure mode sits, and only then by time.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from datetime import datetime

from correlate.catalog import Catalog
from correlate.results import Edge, Member, RootCandidate

COVERAGE_WEIGHT = 0.55
DEPTH_WEIGHT = 0.35
SOURCE_WEIGHT = 0.10
NON_SOURCE_PENALTY = 0.4
SOURCE_LIMIT = 12  # big incidents: only the deepest sources are scored, bounding the cost per update
RELATION_WORDS = {
    "same_pod": "same pod",
    "same_gpu": "same GPU",
    "same_node": "pod on that node",
    "same_deployment": "same deployment",
    "sibling": "sibling pod of the same model/deployment",
    "same_model": "same model",
    "gateway": "same model at the gateway",
    "same_namespace": "same namespace",
    "same_cluster": "same cluster",
    "in_change_scope": "inside the change's scope",
    "same_alertname": "the alert whose rule was edited",
}


@dataclass(frozen=True)
class Ranked:
    edges: tuple[Edge, ...]
    chain: tuple[str, ...]
    candidates: tuple[RootCandidate, ...]


def rank(members: list[Member], edges: list[Edge], links: list[tuple[str, str]], catalog: Catalog) -> Ranked:
    if len(members) == 1:
        only = members[0]
        score = COVERAGE_WEIGHT + DEPTH_WEIGHT * only.depth / 100.0 + SOURCE_WEIGHT
        text = explain(only, [], {only.key: only}, 0, 1, catalog)
        return Ranked((), (only.key,), (RootCandidate(only.key, round(min(1.0, 0.5 * score + 0.5), 3), text),))
    by_key = {m.key: m for m in members}
    order = {m.key: i for i, m in enumerate(members)}
    outgoing: dict[str, list[Edge]] = {}
    incoming: dict[str, list[Edge]] = {}
    for edge in edges:
        outgoing.setdefault(edge.cause, []).append(edge)
        incoming.setdefault(edge.effect, []).append(edge)
    total_others = max(len(members) - 1, 1)
    wanted = max(1, catalog.settings.max_candidates)
    caused = {edge.effect for edge in edges if edge.cause != edge.effect}
    sources = [m for m in members if m.key not in caused]
    source_keys = {m.key for m in sources}
    if len(sources) > SOURCE_LIMIT:
        sources = sorted(sources, key=lambda m: (-m.depth, order[m.key]))[:SOURCE_LIMIT]
    others = [m for m in members if m.key not in source_keys] if len(sources) < wanted else []
    others.sort(key=lambda m: (-m.depth, order[m.key]))
    scored: list[tuple[float, int, str, int]] = []
    reach_of = _Reachability(members, edges, links)
    for member in sources + others[: wanted - len(sources)]:
        reach = reach_of.count(member.key)
        coverage = reach / total_others if len(members) > 1 else 1.0
        depth = member.depth / 100.0
        is_source = member.key in source_keys
        score = COVERAGE_WEIGHT * coverage + DEPTH_WEIGHT * depth + (SOURCE_WEIGHT if is_source else 0.0)
        if not is_source:
            score *= NON_SOURCE_PENALTY
        scored.append((score, -order[member.key], member.key, reach))
    scored.sort(reverse=True)
    top = scored[:wanted]
    total_score = sum(s for s, *_ in top) or 1.0
    candidates = tuple(
        RootCandidate(
            alert_key=key,
            confidence=round(min(1.0, 0.5 * score + 0.5 * score / total_score), 3),
            explanation=explain(by_key[key], outgoing.get(key, []), by_key, reach, len(members), catalog),
        )
        for score, _, key, reach in top
    )
    root = candidates[0].alert_key
    tree = _best_incoming(members, incoming, catalog)
    return Ranked(edges=tree, chain=_chain(members, edges, root, order), candidates=candidates)


def _reach(start: str, outgoing: dict[str, list[Edge]], neighbours: dict[str, list[str]], by_key: dict[str, Member]) -> int:
    """Alerts explained by `start`: along causal edges, and across same-trouble links of one mode."""
    seen = {start}
    stack = [start]
    while stack:
        key = stack.pop()
        mode = by_key[key].failure_mode
        nxt = [e.effect for e in outgoing.get(key, ())]
        nxt += [n for n in neighbours.get(key, ()) if by_key[n].failure_mode == mode]
        for other in nxt:
            if other not in seen:
                seen.add(other)
                stack.append(other)
    return len(seen) - 1


class _Reachability:
    """`_reach` for many starts at once: same-mode link components condensed to one node each.

    Every alert of a component reaches the whole component (same-mode links are walked both
    ways), so the alerts a start explains are the members of the components reachable from its
    own along causal edges, less itself; one pass over the links and edges serves every start.
    """

    def __init__(self, members: list[Member], edges: list[Edge], links: list[tuple[str, str]]) -> None:
        mode = {m.key: m.failure_mode for m in members}
        parent = {m.key: m.key for m in members}

        def find(key: str) -> str:
            while parent[key] != key:
                parent[key] = parent[parent[key]]
                key = parent[key]
            return key

        for a, b in links:
            if mode[a] == mode[b]:
                ra, rb = find(a), find(b)
                if ra != rb:
                    parent[rb] = ra
        self.component = {key: find(key) for key in parent}
        self.size: dict[str, int] = {}
        for root in self.component.values():
            self.size[root] = self.size.get(root, 0) + 1
        self.after: dict[str, set[str]] = {}
        component = self.component
        for edge in edges:
            cause, effect = component[edge.cause], component[edge.effect]
            if cause != effect:
                self.after.setdefault(cause, set()).add(effect)

    def count(self, start: str) -> int:
        first = self.component[start]
        seen = {first}
        stack = [first]
        total = 0
        while stack:
            node = stack.pop()
            total += self.size[node]
            for other in self.after.get(node, ()):
                if other not in seen:
                    seen.add(other)
                    stack.append(other)
        return total - 1


def _best_incoming(members: list[Member], incoming: dict[str, list[Edge]], catalog: Catalog) -> tuple[Edge, ...]:
    """One edge per effect: its most direct cause (the shortest lag), so the tree reads cleanly."""
    depth = {m.key: m.depth for m in members}
    chosen: list[Edge] = []
    for member in members:
        options = incoming.get(member.key)
        if options:
            if len(options) == 1:
                chosen.append(options[0])
            else:
                chosen.append(min(options, key=lambda e: (e.lag_seconds < 0, abs(e.lag_seconds), -depth[e.cause], e.cause)))
    return tuple(chosen)


def _chain(members: list[Member], edges: list[Edge], root: str, order: dict[str, int]) -> tuple[str, ...]:
    """All alerts, causes before effects (Kahn's order), the root first, ties by onset."""
    indegree = {m.key: 0 for m in members}
    successors: dict[str, list[str]] = {}
    for edge in edges:
        successors.setdefault(edge.cause, []).append(edge.effect)
        indegree[edge.effect] += 1
    heap = [(0 if k == root else 1, order[k], k) for k, d in indegree.items() if d == 0 or k == root]
    heapq.heapify(heap)
    done: set[str] = set()
    out: list[str] = []
    earliest_left = 0  # members are in onset order (`order`), so the first one not done is the earliest
    while len(out) < len(members):
        if not heap:
            while members[earliest_left].key in done:
                earliest_left += 1
            rest = members[earliest_left].key
            heap.append((1, order[rest], rest))
        _, _, key = heapq.heappop(heap)
        if key in done:
            continue
        done.add(key)
        out.append(key)
        for nxt in successors.get(key, ()):
            indegree[nxt] -= 1
            if indegree[nxt] <= 0 and nxt not in done:
                heapq.heappush(heap, (1, order[nxt], nxt))
    return tuple(out)


def _clock(moment: datetime) -> str:
    return f"{moment.hour:02d}:{moment.minute:02d}"  # strftime("%H:%M"), without its cost


def _lag_words(seconds: float) -> str:
    if abs(seconds) >= 60:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds)} s"


def explain(root: Member, outgoing: list[Edge], by_key: dict[str, Member], reach: int, size: int, catalog: Catalog) -> str:
    """One sentence naming the rule, in the words an on-call engineer would use."""
    label = catalog.modes[root.failure_mode].label if root.failure_mode in catalog.modes else root.failure_mode
    cause_words = f"{label} ({root.alertname or root.key}) on {root.scope.describe()} from {_clock(root.onset)}"
    if size == 1:
        return f"{root.alertname or root.key} on {root.scope.describe()} from {_clock(root.onset)} is this incident's only alert ({label})."
    if not outgoing:
        return (f"{cause_words} shares scope and time with the rest of the incident, "
                f"but no causal rule links it to the other {size - 1} alert(s).")
    edge = min(outgoing, key=lambda e: (by_key[e.effect].onset, e.effect))
    effect = by_key[edge.effect]
    relation = RELATION_WORDS.get(edge.relation, edge.relation.replace("_", " "))
    return (f"{effect.alertname or effect.key} on {effect.scope.describe()} at {_clock(effect.starts_at)} followed "
            f"{cause_words} (rule {edge.rule}, lag {_lag_words(edge.lag_seconds)}, {relation}); "
            f"it explains {reach} of the other {size - 1} alert(s).")
