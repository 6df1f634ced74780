"""What the engine hands back, and the human decisions it takes in.

Decisions name alerts by occurrence key (`Alert.key`), not incidents, because the engine's
incidents are recomputed from alerts and have no identity of their own beyond their members.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from correlate.scope import Scope


@dataclass(frozen=True)
class Merge:
    """The incidents holding these alerts are one incident (pass one alert of each, or all)."""

    alert_keys: tuple[str, ...]


@dataclass(frozen=True)
class Split:
    """These alerts leave their incident and form one of their own, for good."""

    alert_keys: tuple[str, ...]


@dataclass(frozen=True)
class Exclude:
    """The alert belongs to no incident and links nothing together."""

    alert_key: str


@dataclass(frozen=True)
class FalsePositive:
    """A judgement only: the alert stays in its incident, chain and ranking, marked."""

    alert_key: str


Decision = Merge | Split | Exclude | FalsePositive


@dataclass(frozen=True)
class Member:
    key: str
    fingerprint: str
    alertname: str
    starts_at: datetime
    onset: datetime
    ends_at: datetime | None
    layer: str
    failure_mode: str
    classified_by: str
    scope: Scope
    false_positive: bool = False
    depth: int = 0


@dataclass(frozen=True)
class Edge:
    cause: str
    effect: str
    rule: str
    lag_seconds: float
    relation: str


@dataclass(frozen=True)
class RootCandidate:
    alert_key: str
    confidence: float
    explanation: str


@dataclass(frozen=True)
class Incident:
    id: str
    members: tuple[Member, ...]
    edges: tuple[Edge, ...]
    chain: tuple[str, ...]
    root_candidates: tuple[RootCandidate, ...]
    started_at: datetime
    ended_at: datetime | None
    ranked: bool = (
        True  # False: ranking held back (`Correlator.add_many`'s rank_if), so no edges, chain or roots
    )

    @property
    def alert_keys(self) -> tuple[str, ...]:
        return tuple(m.key for m in self.members)

    @property
    def root(self) -> RootCandidate | None:
        return self.root_candidates[0] if self.root_candidates else None

    @property
    def layers(self) -> tuple[str, ...]:
        return tuple(sorted({m.layer for m in self.members}))

    @property
    def failure_modes(self) -> tuple[str, ...]:
        return tuple(sorted({m.failure_mode for m in self.members}))

    @property
    def scope(self) -> dict[str, str]:
        """Scope fields every member that names them agrees on (the incident's common place)."""
        common: dict[str, str] = {}
        conflicting: set[str] = set()
        # Members of one place share one Scope object (the engine makes one per label set): a
        # storm's incident of thousands of alerts has a few hundred, each read once, in order.
        scopes = {id(member.scope): member.scope for member in self.members}
        for scope in scopes.values():
            for field_name, value in scope.as_dict().items():
                if field_name in conflicting:
                    continue
                if common.setdefault(field_name, value) != value:
                    conflicting.add(field_name)
                    del common[field_name]
        return common

    def member(self, key: str) -> Member | None:
        return next((m for m in self.members if m.key == key), None)
