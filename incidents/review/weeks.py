"""ISO weeks in UTC: `2026-W49` runs from Monday 00:00 UTC to the next Monday 00:00 UTC."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
# A review reads the eight weeks before its week and links the one after: years whose weeks
# those reach are out of the calendar's range (0001, 9999) or of any fleet's (before 1970).
YEARS = (1970, 9998)


class BadWeek(ValueError):
    """A week that is not `YYYY-Www` or does not exist (W53 of a 52-week year)."""


@dataclass(frozen=True, order=True)
class Week:
    year: int
    number: int

    @classmethod
    def parse(cls, text: str) -> Week:
        found = _WEEK.match((text or "").strip().upper())
        if not found:
            raise BadWeek(f"week: expected an ISO week like 2026-W49, got {text[:40]!r}")
        year, number = int(found[1]), int(found[2])
        if not YEARS[0] <= year <= YEARS[1]:
            raise BadWeek(f"week: {year} is outside the years a review covers ({YEARS[0]} to {YEARS[1]})")
        try:
            date.fromisocalendar(year, number, 1)
        except ValueError:
            raise BadWeek(f"week: {year} has no week {number}") from None
        return cls(year, number)

    @classmethod
    def of(cls, moment: datetime) -> Week:
        year, number, _ = moment.astimezone(UTC).isocalendar()
        return cls(year, number)

    @classmethod
    def last_complete(cls, now: datetime) -> Week:
        return cls.of(now).shifted(-1)

    @property
    def start(self) -> datetime:
        return datetime.combine(date.fromisocalendar(self.year, self.number, 1), time(), UTC)

    @property
    def end(self) -> datetime:
        """Exclusive: the next week's start."""
        return self.start + timedelta(days=7)

    def shifted(self, weeks: int) -> Week:
        return Week.of(self.start + timedelta(days=7 * weeks))

    def before(self, count: int) -> list[Week]:
        """The `count` weeks before this one, oldest first."""
        return [self.shifted(-n) for n in range(count, 0, -1)]

    def complete(self, now: datetime) -> bool:
        return now >= self.end

    def __str__(self) -> str:
        return f"{self.year}-W{self.number:02d}"
