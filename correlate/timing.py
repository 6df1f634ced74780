"""When the condition behind an alert began, as opposed to when the rule fired.

A rule over a wide window (`avg_over_time(x[15m])`) or described as sustained ("for 10
minutes") fires well after its condition began; reasoning about causes by `startsAt` alone
would make such slow alerts look like effects of what they caused.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from correlate.classify import rule_expressions
from correlate.events import Alert

MIN_COUNTED_WINDOW = timedelta(minutes=6)
MAX_LOOKBACK = timedelta(hours=1)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_WINDOW = re.compile(r"\[\s*(\d+)\s*([smhd])\s*(?::[^\]]*)?\]")
_EVENT_FUNCTIONS = frozenset(
    {
        "increase",
        "changes",
        "resets",
        "max_over_time",
        "count_over_time",
        "present_over_time",
        "last_over_time",
        "delta",
        "idelta",
        "irate",
    }
)
_PROSE = re.compile(
    r"\b(?:for|over|during|within|across|in|sustained(?:\s+for)?|lasting)\s+(?:the\s+)?(?:last\s+|past\s+|previous\s+|at\s+least\s+|more\s+than\s+|longer\s+than\s+)?"
    r"(\d+)[\s-]*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hrs|hours?)\b",
    re.IGNORECASE,
)
_PROSE_WINDOW = re.compile(
    r"\b(\d+)[\s-]*(m|min|minutes?|h|hours?)[\s-]+(?:window|average|avg|rolling)\b", re.IGNORECASE
)
_BRACKET = re.compile(r"\[\s*(\d+)\s*([smhd])\s*\]")
_FOR_KEYS = ("for", "window", "duration", "pending_for")


def as_utc(moment: datetime) -> datetime:
    tz = moment.tzinfo
    if tz is UTC:
        return moment  # what astimezone(timezone.utc) returns for it too
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def lookback(alert: Alert) -> timedelta:
    """How long before `startsAt` the condition plausibly began (0 when nothing says so)."""
    candidates = [_rule_window(alert.generator_url)]
    for key in ("description", "summary", "message"):
        text = alert.annotations.get(key, "")
        if text:
            candidates.append(_prose_window(text))
    for key in _FOR_KEYS:
        value = alert.annotations.get(key) or alert.labels.get(key)
        if value:
            candidates.append(_duration(value))
    window = max(candidates)
    if window < MIN_COUNTED_WINDOW:
        return timedelta(0)
    return min(window, MAX_LOOKBACK)


def onset_of(alert: Alert) -> datetime:
    return as_utc(alert.starts_at) - lookback(alert)


@lru_cache(maxsize=4096)
def _rule_window(generator_url: str) -> timedelta:
    """_expression_window of the rule a generatorURL links (one rule's alerts all link the same)."""
    return _expression_window(rule_expressions(generator_url))


def _expression_window(expr: str) -> timedelta:
    """The widest range window of a level-like function; event counters fire at once."""
    best = timedelta(0)
    for found in _WINDOW.finditer(expr):
        if _enclosing_function(expr, found.start()).lower() in _EVENT_FUNCTIONS:
            continue
        best = max(best, timedelta(seconds=int(found.group(1)) * _UNIT_SECONDS[found.group(2)]))
    return best


def _enclosing_function(expr: str, position: int) -> str:
    """Name of the call whose parentheses hold `position` (subqueries like `(...)[15m:1m]` too)."""
    depth = 0
    for i in range(position - 1, -1, -1):
        char = expr[i]
        if char == ")":
            depth += 1
        elif char == "(":
            if depth == 0:
                name = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", expr[:i])
                return name.group(1) if name else ""
            depth -= 1
    return ""


def _prose_window(text: str) -> timedelta:
    best = timedelta(0)
    for amount, unit in _PROSE.findall(text) + _PROSE_WINDOW.findall(text):
        best = max(best, timedelta(seconds=int(amount) * _UNIT_SECONDS[unit[0].lower()]))
    for amount, unit in _BRACKET.findall(text):
        best = max(best, timedelta(seconds=int(amount) * _UNIT_SECONDS[unit]))
    return best


def _duration(value: str) -> timedelta:
    parts = re.findall(r"(\d+)\s*([smhd])", value.lower())
    return timedelta(seconds=sum(int(n) * _UNIT_SECONDS[u] for n, u in parts))
