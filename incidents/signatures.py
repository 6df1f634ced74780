"""An incident's chain signature: what recurs when the same trouble comes back.

The distinct (layer, failure_mode) pairs of its chain in causal order, repeats collapsed
(`../shared/CONTRACT.md`), e.g. `engine:kv_fragmentation>platform:oom>platform:restart`. Two
incidents are the same trouble again when their signatures are equal on the same deployment or
model: alert names and pods change between fleets and rollouts, the shape of the cascade does not.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_LENGTH = 500  # the column's width; a storm's chain has few distinct pairs, so this is rarely cut


def chain_signature(steps: Iterable[tuple[str, str]]) -> str:
    """The signature of a chain given as (layer, failure_mode) per step, cause before effect."""
    seen: dict[str, None] = {}
    for layer, mode in steps:
        seen.setdefault(f"{layer or 'unknown'}:{mode or 'other'}", None)
    return ">".join(seen)[:MAX_LENGTH]


def signature_words(signature: str) -> str:
    """The signature as a person reads it: 'kv_fragmentation (engine) → oom (platform)'."""
    parts = (pair.partition(":") for pair in signature.split(">") if pair)
    return " → ".join(f"{mode} ({layer})" for layer, _, mode in parts)
