"""The review's summaries: a median and a 90th percentile, never a bare mean (a week's MTTR is
one long incident and many short ones)."""

from __future__ import annotations

from collections.abc import Iterable


def quantile(ordered: list[float], share: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default, Excel's PERCENTILE.INC)."""
    position = (len(ordered) - 1) * share
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """{median, p90, n} of the values that are known; medians of nothing are null."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return {"median": None, "p90": None, "n": 0}
    return {"median": round(quantile(known, 0.5), 3), "p90": round(quantile(known, 0.9), 3), "n": len(known)}


def counted(keys: Iterable[str]) -> dict[str, int]:
    """How often each key occurs, most frequent first (ties by name)."""
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
