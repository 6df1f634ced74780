"""How two scopes relate (`relations`, `in_change_scope`), and the pod->node and pod->GPU links
learned from alerts that carry both (`Topology`).

What a scope is and how labels become one is `correlate/scope.py`'s; its public names are
importable from here too, where callers have long imported them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from correlate.scope import (
    _SIZE_TOKEN,
    Scope,
    cluster_of,
    deployment_of_pod,
    gateway_key,
    gateway_stems,
    group_of,
    scope_of,
)

__all__ = [
    "Scope",
    "Topology",
    "cluster_of",
    "deployment_of_pod",
    "gateway_key",
    "gateway_stems",
    "group_of",
    "in_change_scope",
    "relations",
    "scope_of",
]


@dataclass
class Topology:
    """pod -> nodes and pod -> GPUs, learned from alerts that carry both ends, with a time.

    A link holds from `grace` before the earliest alert that shows it: that keeps the answer a
    function of the set of alerts (not of their arrival), while a link learned late in the day
    cannot regroup the whole day.
    """

    grace: float = 600.0
    pod_nodes: dict[str, dict[str, float]] = field(default_factory=dict)
    pod_gpus: dict[str, dict[str, float]] = field(default_factory=dict)
    node_pods: dict[str, dict[str, float]] = field(default_factory=dict)
    gpu_pods: dict[str, dict[str, float]] = field(default_factory=dict)
    version: int = 0
    pod_versions: dict[str, int] = field(default_factory=dict)  # bumped when that pod's links change
    # The version at which a pod's links, or the pods on a node or GPU, last changed.
    pod_changed: dict[str, int] = field(default_factory=dict)
    node_changed: dict[str, int] = field(default_factory=dict)
    gpu_changed: dict[str, int] = field(default_factory=dict)

    def learn(self, scope: Scope, t: float) -> list[tuple[str, str, float]]:
        """Record the links `scope` shows at time t; returns (kind, value, holds-from) of new or
        earlier links."""
        if not scope.pod:
            return []
        changed: list[tuple[str, str, float]] = []
        ends = ([("node", self.pod_nodes, self.node_pods, scope.node)] if scope.node else []) + [
            ("gpu", self.pod_gpus, self.gpu_pods, gpu) for gpu in scope.gpus
        ]
        valid_from = t - self.grace
        for kind, forward, backward, value in ends:
            known = forward.setdefault(scope.pod, {})
            if valid_from < known.get(value, float("inf")):
                known[value] = valid_from
                backward.setdefault(value, {})[scope.pod] = valid_from
                changed.append((kind, value, valid_from))
        if changed:
            self.version += 1
            self.pod_versions[scope.pod] = self.pod_versions.get(scope.pod, 0) + 1
            self.pod_changed[scope.pod] = self.version
            for kind, value, _ in changed:
                (self.node_changed if kind == "node" else self.gpu_changed)[value] = self.version
        return changed

    def nodes(self, scope: Scope, at: float) -> frozenset[str]:
        learned = self.pod_nodes.get(scope.pod) if scope.pod else None
        found = {n for n, since in learned.items() if since <= at} if learned else set()
        if scope.node:
            found.add(scope.node)
        return frozenset(found)

    def gpus(self, scope: Scope, at: float) -> frozenset[str]:
        learned = self.pod_gpus.get(scope.pod) if scope.pod else None
        if not learned:
            return scope.gpus
        return scope.gpus | {g for g, since in learned.items() if since <= at}

    def latest_since(self, pod: str) -> float:
        """When the newest link of `pod` starts to hold: placement is final for any later time."""
        times = [t for table in (self.pod_nodes, self.pod_gpus) for t in table.get(pod, {}).values()]
        return max(times, default=float("-inf"))

    def knows(self, pod: str) -> bool:
        return pod in self.pod_nodes or pod in self.pod_gpus

    def pods_steady(self, kind: str, value: str, at: float) -> tuple[float, float]:
        """The times between which `pods_on(kind, value, t)` lists the same pods as at `at`."""
        pods = (self.node_pods if kind == "node" else self.gpu_pods).get(value)
        if not pods:
            return float("-inf"), float("inf")
        began = max((since for since in pods.values() if since <= at), default=float("-inf"))
        changes = min((since for since in pods.values() if since > at), default=float("inf"))
        return began, changes

    def pods_on(self, kind: str, value: str, at: float) -> list[str]:
        pods = (self.node_pods if kind == "node" else self.gpu_pods).get(value)
        return [p for p, since in pods.items() if since <= at] if pods else []


def relations(
    a: Scope,
    b: Scope,
    a_nodes: frozenset[str],
    b_nodes: frozenset[str],
    a_gpus: frozenset[str],
    b_gpus: frozenset[str],
) -> frozenset[str]:
    """Every relation that holds between two scopes of one cluster (see docs/catalog.md)."""
    found: set[str] = {"same_cluster"}
    same_ns = not a.namespace or not b.namespace or a.namespace == b.namespace
    if a.namespace and a.namespace == b.namespace:
        found.add("same_namespace")
    if a.pod and a.pod == b.pod and same_ns:
        found.add("same_pod")
    elif a.group and a.group == b.group and same_ns:
        found.add("same_group")  # one multi-node engine: a LeaderWorkerSet group's leader and workers
    if a_gpus and b_gpus and not a_gpus.isdisjoint(b_gpus):
        found.add("same_gpu")
    if a_nodes and b_nodes and not a_nodes.isdisjoint(b_nodes):
        # Two different pods sharing a node are neighbours, not one trouble: only a node- or
        # GPU-level alert (no pod) relates to the pods on its node.
        found.add("co_located" if a.pod and b.pod and a.pod != b.pod else "same_node")
    elif (a.pod and not a_nodes and not a_gpus and not b.pod and (b_nodes or b_gpus)) or (
        b.pod and not b_nodes and not b_gpus and not a.pod and (a_nodes or a_gpus)
    ):
        # A node- or GPU-level alert and a pod placed on no node or GPU (its alerts carry none,
        # and none taught the topology where it runs): it may run there, and only time can tell.
        found.add("unplaced")
    if a.deployment and a.deployment == b.deployment and same_ns:
        found.update(("same_deployment", "sibling"))
    if a.model and a.model == b.model:
        found.update(("same_model", "sibling"))
    if a.gateway_keys and not a.gateway_keys.isdisjoint(b.gateway_keys) and not _other_models(a, b):
        common = a.gateway_keys & b.gateway_keys
        if any(k.count("~") != 1 for k in common) or _versions_agree(a, b):
            found.add("gateway")
    found_set = frozenset(found)
    return _RELATION_SETS.setdefault(found_set, found_set)


# The relation sets that occur are few (a few dozen combinations), while the engine keeps one per
# pair of scopes it compared (`Linker._relations_cache`): one frozenset each was the largest share
# of a kept correlation state's memory (bench/correlate/kept_memory.py). Equal sets share one.
_RELATION_SETS: dict[frozenset[str], frozenset[str]] = {}


@lru_cache(maxsize=65536)
def _family_version_size(key: str) -> tuple[str, tuple[str, ...], str] | None:
    """'llama-3-1-405b-instruct' -> ('llama', ('3', '1'), '405b'); None without a size word."""
    tokens = key.split("-")
    for i, token in enumerate(tokens[1:], start=1):
        if _SIZE_TOKEN.match(token):
            return tokens[0], tuple(t for t in tokens[1:i] if any(ch.isdigit() for ch in t)), token
    return None


def _versions_agree(a: Scope, b: Scope) -> bool:
    """Whether two scopes met on family and size name one model version: 'llama-405b' (no version)
    agrees with 'llama-3-1-405b', and 'llama-3-70b' with 'llama-3-1-70b'; 'llama-2-70b' and
    'llama-3-70b' are two models."""
    mine = [_family_version_size(gateway_key(v)) for v in (a.deployment, a.model, a.route) if v]
    theirs = [_family_version_size(gateway_key(v)) for v in (b.deployment, b.model, b.route) if v]
    for x in mine:
        for y in theirs:
            if x and y and x[0] == y[0] and x[2] == y[2]:
                short, long = sorted((x[1], y[1]), key=len)
                if long[: len(short)] == short:
                    return True
    return False


def _other_models(a: Scope, b: Scope) -> bool:
    """Whether two scopes that meet only on a shared stem name two different models.

    A stem joins a deployment named after its model plus a purpose ('qwen2-5-72b-summarize') to
    the model's name, but two model names ('Meta-Llama-3-8B', 'Meta-Llama-3-8B-Instruct'), or
    the pods of two deployments ('llama-3-8b', 'llama-3-8b-instruct'), that differ are two models,
    unless they differ by trailing numbers only: a LeaderWorkerSet's leader and worker pods
    ('llama-405b-0', 'llama-405b-0-1'), numbered deployments of one model ('llama-3-8b-0',
    'llama-3-8b-1'), as the stem alone related them before.
    """
    if not _model_names(a.deployment, a.model, a.route).isdisjoint(
        _model_names(b.deployment, b.model, b.route)
    ):
        return False
    if a.model and b.model:
        return _unnumbered(gateway_key(a.model)) != _unnumbered(gateway_key(b.model))
    if not (a.pod and b.pod and a.deployment and b.deployment):
        return False
    return _unnumbered(gateway_key(a.deployment)) != _unnumbered(gateway_key(b.deployment))


@lru_cache(maxsize=65536)
def _model_names(deployment: str, model: str, route: str) -> frozenset[str]:
    """The gateway keys of a scope's workload, model and route names (those it has)."""
    return frozenset(gateway_key(v) for v in (deployment, model, route) if v)


_TRAILING_NUMBERS = re.compile(r"(?:-\d+)+$")


@lru_cache(maxsize=65536)
def _unnumbered(name: str) -> str:
    """'llama-405b-0-1' -> 'llama-405b'; 'llama-3-8b-instruct' stays as it is."""
    return _TRAILING_NUMBERS.sub("", name)


def in_change_scope(
    change: Scope, other: Scope, other_nodes: frozenset[str], relation: frozenset[str]
) -> bool:
    """Whether `other` lies inside what a change touched: its pod, node, workload, or namespace."""
    if change.pod:
        return "same_pod" in relation or bool(change.node and change.node in other_nodes)
    if change.deployment or change.model or change.route:
        return bool(relation & {"sibling", "gateway"})
    if change.node:
        return change.node in other_nodes
    if change.namespace:
        return not other.namespace or other.namespace == change.namespace
    return True
