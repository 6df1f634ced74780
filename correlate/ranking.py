"""Root candidates, the cause-to-effect chain and the explanation of one incident.

The root is the causal source, not the earliest alert: a slow rule over a wide window fires
last yet may be the cause, and an unrelated alert that happened to fire first explains nothing.
So candidates are ranked by how much of the incident they explain through causal edges, then
by how deep their failure mode sits, and only then by time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
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
    "same_group": "same pod group (leader and workers)",
    "same_deployment": "same deployment",
    "sibling": "sibling pod of the same model/deployment",
    "same_model": "same model",
    "gateway": "same model at the gateway",
    "same_namespace": "same namespace",
    "same_cluster": "same cluster",
    "in_change_scope": "inside the change's scope",
    "unplaced": "timing alone: the pod is placed on no node",
    "same_alertname": "the alert whose rule was edited",
}


@dataclass(frozen=True)
class Ranked:
    edges: tuple[Edge, ...]
    chain: tuple[str, ...]
    candidates: tuple[RootCandidate, ...]


def rank(members: list[Member], edges: list[Edge], links: list[tuple[str, str]], catalog: Catalog) -> Ranked:
    if len(members) == 1:
        return _rank_only(members[0], catalog)
    # Members are numbered by their position (onset order): the graph work runs on lists and
    # ints, which big incidents rebuilt on every update need.
    order = {m.key: i for i, m in enumerate(members)}
    return rank_numbered(
        members, _Graph(members, edges, order), [(order[a], order[b]) for a, b in links], catalog
    )


def _rank_only(only: Member, catalog: Catalog) -> Ranked:
    score = COVERAGE_WEIGHT + DEPTH_WEIGHT * only.depth / 100.0 + SOURCE_WEIGHT
    text = explain(only, [], {only.key: only}, 0, 1, catalog)
    return Ranked((), (only.key,), (RootCandidate(only.key, round(min(1.0, 0.5 * score + 0.5), 3), text),))


def rank_numbered(
    members: list[Member], graph: _Graph, links: list[tuple[int, int]], catalog: Catalog
) -> Ranked:
    """rank() of members numbered by position, with edges and links as member numbers (as the
    engine holds them): an edge's `Edge` is asked of the graph only when shown."""
    if len(members) == 1:
        return _rank_only(members[0], catalog)
    total_others = max(len(members) - 1, 1)
    wanted = max(1, catalog.settings.max_candidates)
    caused = {effect for cause, effect in zip(graph.causes, graph.effects, strict=True) if cause != effect}
    depth = [m.depth for m in members]

    def deepest_first(i: int) -> tuple[int, int]:
        return (-depth[i], i)

    sources = [i for i in range(len(members)) if i not in caused]
    if len(sources) > SOURCE_LIMIT:
        sources = sorted(sources, key=deepest_first)[:SOURCE_LIMIT]
    others = sorted(caused, key=deepest_first) if len(sources) < wanted else []
    scored: list[tuple[float, int, str, int]] = []
    reach_of = _Reachability.of_graph(members, graph, links)
    for i in sources + others[: wanted - len(sources)]:
        member = members[i]
        reach = reach_of.count_index(i)
        coverage = reach / total_others if len(members) > 1 else 1.0
        is_source = i not in caused
        score = (
            COVERAGE_WEIGHT * coverage
            + DEPTH_WEIGHT * (member.depth / 100.0)
            + (SOURCE_WEIGHT if is_source else 0.0)
        )
        if not is_source:
            score *= NON_SOURCE_PENALTY
        scored.append((score, -i, member.key, reach))
    scored.sort(reverse=True)
    top = scored[:wanted]
    total_score = sum(s for s, *_ in top) or 1.0
    by_key = {m.key: m for m in members}
    first = min(range(len(members)), key=lambda i: (members[i].starts_at, i))
    first_fired = (members[first], first in caused)
    outgoing = _outgoing_of({-negative for _, negative, _, _ in top}, members, graph)
    through = _kin_explaining(
        {-negative for _, negative, key, reach in top if reach and key not in outgoing}, members, graph, links
    )
    candidates = tuple(
        RootCandidate(
            alert_key=key,
            confidence=round(min(1.0, 0.5 * score + 0.5 * score / total_score), 3),
            explanation=explain(
                by_key[key],
                outgoing.get(key, []),
                by_key,
                reach,
                len(members),
                catalog,
                through=through.get(key),
                first_fired=first_fired,
            ),
        )
        for score, _, key, reach in top
    )
    root = -top[0][1]
    tree = _best_incoming(graph, depth)
    return Ranked(edges=tree, chain=_chain(members, graph, root), candidates=candidates)


class _Graph:
    """An incident's causal edges as (cause, effect) member numbers and lags, in the order given.

    `edge(n)` gives the n-th edge's `Edge`: only the tree's and the explained candidates' are
    shown, so the engine makes the others never.
    """

    __slots__ = ("causes", "effects", "lags", "edge")

    def __init__(self, members: list[Member], edges: list[Edge], order: dict[str, int]) -> None:
        self.causes = [order[edge.cause] for edge in edges]
        self.effects = [order[edge.effect] for edge in edges]
        self.lags = [edge.lag_seconds for edge in edges]
        self.edge: Callable[[int], Edge] = edges.__getitem__


def numbered_edges(
    causes: list[int], effects: list[int], lags: list[float], edge: Callable[[int], Edge]
) -> _Graph:
    """An incident's edges for `rank_numbered`: cause and effect member numbers, lags, and how to
    make the n-th edge's `Edge` when it is shown."""
    graph = _Graph.__new__(_Graph)
    graph.causes, graph.effects, graph.lags, graph.edge = causes, effects, lags, edge
    return graph


def _outgoing_of(starts: set[int], members: list[Member], graph: _Graph) -> dict[str, list[Edge]]:
    """The edges out of a few candidates (only the explained ones need them), in the order given."""
    outgoing: dict[str, list[Edge]] = {}
    for number, cause in enumerate(graph.causes):
        if cause in starts:
            outgoing.setdefault(members[cause].key, []).append(graph.edge(number))
    return outgoing


def _kin_explaining(
    starts: set[int], members: list[Member], graph: _Graph, links: list[tuple[int, int]]
) -> dict[str, tuple[Member, list[Edge]]]:
    """For candidates with no causal edge of their own that still explain others: the earliest
    member of their same-trouble component (the same failure on a sibling, say) that has one, with
    its edges. The candidate is explained through it rather than as linked to nothing."""
    if not starts or not links:
        return {}
    neighbours: dict[int, list[int]] = {}
    for a, b in links:
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    causes = set(graph.causes)
    kin_of: dict[int, int] = {}
    for start in starts:
        component = _linked_to(start, neighbours)
        kin = min(
            (n for n in component if n in causes and n != start), default=None
        )  # members are in onset order
        if kin is not None:
            kin_of[start] = kin
    if not kin_of:
        return {}
    outgoing = _outgoing_of(set(kin_of.values()), members, graph)  # one pass over the edges for them all
    return {members[start].key: (members[kin], outgoing[members[kin].key]) for start, kin in kin_of.items()}


def _linked_to(start: int, neighbours: dict[int, list[int]]) -> set[int]:
    """Every member joined to `start` through same-trouble links, `start` included."""
    seen, pending = {start}, [start]
    while pending:
        for other in neighbours.get(pending.pop(), ()):
            if other not in seen:
                seen.add(other)
                pending.append(other)
    return seen


def _reach(
    start: str, outgoing: dict[str, list[Edge]], neighbours: dict[str, list[str]], by_key: dict[str, Member]
) -> int:
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

    __slots__ = ("component", "size", "after", "order")

    def __init__(self, members: list[Member], edges: list[Edge], links: list[tuple[str, str]]) -> None:
        order = {m.key: i for i, m in enumerate(members)}
        self._condense(members, _Graph(members, edges, order), [(order[a], order[b]) for a, b in links])
        self.order = order

    @classmethod
    def of_graph(cls, members: list[Member], graph: _Graph, links: list[tuple[int, int]]) -> _Reachability:
        reach = cls.__new__(cls)
        reach._condense(members, graph, links)
        return reach

    def _condense(self, members: list[Member], graph: _Graph, links: list[tuple[int, int]]) -> None:
        mode = [m.failure_mode for m in members]
        parent = list(range(len(members)))
        for a, b in links:
            if mode[a] == mode[b]:
                while parent[a] != a:
                    parent[a] = a = parent[parent[a]]
                while parent[b] != b:
                    parent[b] = b = parent[parent[b]]
                if a != b:
                    parent[b] = a
        component = parent  # roots written in place: every member's entry becomes its root
        for i in range(len(component)):
            root = component[i]
            while component[root] != root:
                root = component[root]
            _point_path_at(component, i, root)
        size = [0] * len(component)
        for root in component:
            size[root] += 1
        after: dict[int, set[int]] = {}
        for cause, effect in zip(graph.causes, graph.effects, strict=True):
            cause, effect = component[cause], component[effect]
            if cause != effect:
                found = after.get(cause)
                if found is None:
                    after[cause] = {effect}
                else:
                    found.add(effect)
        self.component, self.size, self.after = component, size, after

    def count(self, start: str) -> int:
        return self.count_index(self.order[start])

    def count_index(self, start: int) -> int:
        first = self.component[start]
        seen = {first}
        stack = [first]
        total = 0
        size, after = self.size, self.after
        while stack:
            node = stack.pop()
            total += size[node]
            for other in after.get(node, ()):
                if other not in seen:
                    seen.add(other)
                    stack.append(other)
        return total - 1


def _point_path_at(parent: list[int], start: int, root: int) -> None:
    """Every node on the path from `start` up to its `root` points at the root directly.

    Unions are not balanced, so a big component can be one long chain; without this, finding
    each member's root walks the rest of the chain again (quadratic in the component's size).
    """
    while parent[start] != root:
        parent[start], start = root, parent[start]


def _best_incoming(graph: _Graph, depth: list[int]) -> tuple[Edge, ...]:
    """One edge per effect: its most direct cause (the shortest lag), so the tree reads cleanly."""
    best: dict[int, int] = {}  # effect -> number of its edge chosen so far
    lags = graph.lags
    causes = graph.causes
    edge = graph.edge
    for number, effect in enumerate(graph.effects):
        held = best.get(effect)
        if held is None:
            best[effect] = number
            continue
        # _directness() compared on its first two parts inline: the full key only on a tie.
        lag, held_lag = lags[number], lags[held]
        if (lag < 0) != (held_lag < 0):
            better = held_lag < 0
        elif abs(lag) != abs(held_lag):
            better = abs(lag) < abs(held_lag)
        else:
            better = _directness(edge(number), depth[causes[number]]) < _directness(
                edge(held), depth[causes[held]]
            )
        if better:
            best[effect] = number
    return tuple([edge(best[i]) for i in sorted(best)])


def _directness(edge: Edge, cause_depth: int) -> tuple:
    lag = edge.lag_seconds
    return (lag < 0, abs(lag), -cause_depth, edge.cause)


def _chain(members: list[Member], graph: _Graph, root: int) -> tuple[str, ...]:
    """All alerts, causes before effects (Kahn's order), the root first, ties by onset."""
    count = len(members)
    indegree = [0] * count
    successors: dict[int, list[int]] = {}
    for cause, effect in zip(graph.causes, graph.effects, strict=True):
        found = successors.get(cause)
        if found is None:
            successors[cause] = [effect]
        else:
            found.append(effect)
        indegree[effect] += 1
    # Member numbers are onset order, so a heap of numbers pops the earliest ready alert.
    heap = [i for i in range(count) if indegree[i] == 0 and i != root]
    heapq.heapify(heap)
    done = bytearray(count)
    out: list[int] = []
    earliest_left = 0  # the first member not done is the earliest (cycles fall back to it)
    pop, push = heapq.heappop, heapq.heappush
    current = root
    while True:
        done[current] = 1
        out.append(current)
        if len(out) == count:
            break
        for nxt in successors.get(current, ()):
            indegree[nxt] -= 1
            if indegree[nxt] <= 0 and not done[nxt]:
                push(heap, nxt)
        current = -1
        while heap:
            candidate = pop(heap)
            if not done[candidate]:
                current = candidate
                break
        if current < 0:
            while done[earliest_left]:
                earliest_left += 1
            current = earliest_left
    return tuple([members[i].key for i in out])


def _clock(moment: datetime) -> str:
    return "%02d:%02d" % (moment.hour, moment.minute)  # strftime("%H:%M"), without its cost


def _lag_words(seconds: float) -> str:
    if abs(seconds) >= 60:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds)} s"


def explain(
    root: Member,
    outgoing: list[Edge],
    by_key: dict[str, Member],
    reach: int,
    size: int,
    catalog: Catalog,
    through: tuple[Member, list[Edge]] | None = None,
    first_fired: tuple[Member, bool] | None = None,
) -> str:
    """A sentence naming the rule, in the words an on-call engineer would use, then why the
    alert that fired first is not the root and which evidence decided the root's failure mode
    when its labels and its name or rule disagree. `through`: the member of the root's same
    trouble whose edges explain what the root itself has no edge to; `first_fired`: the member
    that fired first and whether an edge makes it an effect."""
    text = _rule_sentence(root, outgoing, by_key, reach, size, catalog, through)
    if first_fired is not None and first_fired[0].key != root.key:
        text += _why_not_first(root, *first_fired)
    return text + _decided_words(root, catalog)


def _rule_sentence(
    root: Member,
    outgoing: list[Edge],
    by_key: dict[str, Member],
    reach: int,
    size: int,
    catalog: Catalog,
    through: tuple[Member, list[Edge]] | None,
) -> str:
    label = (
        catalog.modes[root.failure_mode].label if root.failure_mode in catalog.modes else root.failure_mode
    )
    cause_words = (
        f"{label} ({root.alertname or root.key}) on {root.scope.describe()} from {_clock(root.onset)}"
    )
    if size == 1:
        return (
            f"{root.alertname or root.key} on {root.scope.describe()} from {_clock(root.onset)} "
            f"is this incident's only alert ({label})."
        )
    if not outgoing and through is not None:
        kin, kin_edges = through
        edge = min(kin_edges, key=lambda e: (by_key[e.effect].onset, e.effect))
        effect = by_key[edge.effect]
        relation = RELATION_WORDS.get(edge.relation, edge.relation.replace("_", " "))
        return (
            f"{cause_words} is the same trouble as {kin.alertname or kin.key} on {kin.scope.describe()} from "
            f"{_clock(kin.onset)}, which {effect.alertname or effect.key} on {effect.scope.describe()} at "
            f"{_clock(effect.starts_at)} followed "
            f"(rule {edge.rule}, lag {_lag_words(edge.lag_seconds)}, {relation}); "
            f"it explains {reach} of the other {size - 1} alert(s)."
        )
    if not outgoing:
        return (
            f"{cause_words} shares scope and time with the rest of the incident, "
            f"but no causal rule links it to the other {size - 1} alert(s)."
        )
    edge = min(outgoing, key=lambda e: (by_key[e.effect].onset, e.effect))
    effect = by_key[edge.effect]
    relation = RELATION_WORDS.get(edge.relation, edge.relation.replace("_", " "))
    return (
        f"{effect.alertname or effect.key} on {effect.scope.describe()} "
        f"at {_clock(effect.starts_at)} followed "
        f"{cause_words} (rule {edge.rule}, lag {_lag_words(edge.lag_seconds)}, {relation}); "
        f"it explains {reach} of the other {size - 1} alert(s)."
    )


def _held_words(member: Member) -> str:
    held = (member.starts_at - member.onset).total_seconds()
    return f": its rule holds {_lag_words(held)}" if held >= 60 else ""


def _why_not_first(root: Member, first: Member, first_is_effect: bool) -> str:
    """Why the alert that fired first (before the root) is not the root, or '' when the root fired first."""
    if first.starts_at >= root.starts_at:
        return ""
    name, root_name = first.alertname or first.key, root.alertname or root.key
    opening = f" {name} fired first (at {_clock(first.starts_at)}), but"
    if first.onset > root.onset:
        return (
            f"{opening} its condition began at {_clock(first.onset)}{_held_words(first)}, after "
            f"{root_name}'s (from {_clock(root.onset)}{_held_words(root)})."
        )
    if first_is_effect:
        return f"{opening} the causal rules make it an effect, not a cause, of the rest."
    return f"{opening} no causal rule makes it a cause of the rest."


_EVIDENCE_WORDS = {
    "name": "name",
    "expr": "rule expression",
    "annotations": "annotated expression",
    "text": "description",
}


def _decided_words(root: Member, catalog: Catalog) -> str:
    """Which evidence decided the root's failure mode when its labels and its name or rule disagree."""
    how, _, rest = root.classified_by.partition(":")
    if how not in ("over-label", "labels-over"):
        return ""
    origin, _, matcher_id = rest.partition(":")
    evidence = _EVIDENCE_WORDS.get(origin, origin)
    name = root.alertname or root.key
    if how == "over-label":
        return (
            f" {name}'s failure_mode label contradicts its layer label ({root.layer}); its {evidence} "
            f"agrees with the layer and decided the mode ({_mode_label(root.failure_mode, catalog)})."
        )
    other = next((m.mode for m in catalog.matchers if m.id == matcher_id), "")
    return (
        f" {name}'s failure_mode label decided the mode ({_mode_label(root.failure_mode, catalog)}); its "
        f"{evidence} reads as {_mode_label(other, catalog) if other else 'another mode'}."
    )


def _mode_label(mode: str, catalog: Catalog) -> str:
    return catalog.modes[mode].label if mode in catalog.modes else mode
