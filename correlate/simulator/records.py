"""What a story records besides its alert occurrences: change events (`Change`), the ground
truth's incidents (`Incident`) and the people's intended actions (`Intent`), resolved to times
and alerts when the story is built (`output.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Change:
    at: int
    body: dict
    fingerprint: str
    starts_at: str
    seq: int = 0


@dataclass
class Incident:
    id: str
    root: object = None
    family: str = ""
    members: list = field(default_factory=list)


@dataclass
class Intent:
    action: str
    occ: object
    after_s: float | None
    at: int | None
    by: str
    fields: dict
