"""What a story records besides its alert occurrences: change events (`Change`), the ground
truth's incidents (`Incident`) and the people's intended actions (`Intent`), resolved to times
and alerts when the story is built (`output.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .alertmanager import Occurrence


@dataclass
class Change:
    at: int
    body: dict[str, Any]  # the Events API body, as changes.jsonl holds it
    fingerprint: str
    starts_at: str
    seq: int = 0


@dataclass
class Incident:
    id: str
    root: Occurrence | Change | None = None
    family: str = ""
    members: list[Occurrence | Change] = field(default_factory=list)


@dataclass
class Intent:
    action: str
    occ: Occurrence | Change
    after_s: float | None
    at: int | None
    by: str
    fields: dict[str, Any]  # the action's own fields: a level, a username, a text; `into`, `alerts`
