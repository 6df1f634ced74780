"""Scenario simulator: realistic alert, change, action and metric streams with ground truth.

Pure Python (no Django). `python -m correlate.simulator --list`;
`python -m correlate.simulator --scenario NAME --start ISO [--seed N] --out DIR`.
"""

from __future__ import annotations

from .core import parse_start
from .scenarios import SCENARIOS, build

OUTPUT_FILES = ("alerts.jsonl", "changes.jsonl", "actions.jsonl", "metrics.om", "truth.json")


def scenario_names() -> list[str]:
    return list(SCENARIOS)


def describe(name: str) -> str:
    return SCENARIOS[name][2]


def simulate(scenario: str, start: str, seed: int, out_dir: str) -> dict[str, int]:
    """Writes the five files for `scenario` starting at `start` (ISO 8601); returns their sizes."""
    if scenario not in SCENARIOS:
        raise KeyError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    story = build(scenario, parse_start(start), seed)
    return story.write(out_dir)


__all__ = ["OUTPUT_FILES", "describe", "scenario_names", "simulate"]
