"""The normalised alert every source is turned into before correlation."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

FIRING = "firing"
RESOLVED = "resolved"


@dataclass(frozen=True)
class Alert:
    """One occurrence of an alert: a fingerprint firing from `starts_at` (event time, not arrival)."""

    fingerprint: str
    starts_at: datetime
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    ends_at: datetime | None = None
    status: str = FIRING
    generator_url: str = ""

    @property
    def key(self) -> str:
        """Identity of the occurrence: one fingerprint can fire again later as a new occurrence."""
        return occurrence_key(self.fingerprint, self.starts_at)

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "")


def is_zero_time(moment: datetime) -> bool:
    """Go's zero time.Time (0001-01-01T00:00:00Z), which Alertmanager and Grafana send for "none"
    (a firing alert's end, a test alert's start): any moment of year 1, whatever its offset."""
    return moment.year <= 1


def change_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """A change event's labels as the engine reads them: layer `process`, failure mode `change`,
    whatever the sender's labels say (the app stores changes by kind; the engine reads labels)."""
    return {**labels, "failure_mode": "change", "layer": "process"}


def occurrence_key(fingerprint: str, starts_at: datetime) -> str:
    d = starts_at
    if d.year < 1000:  # strftime's %Y does not pad those
        return f"{fingerprint}@{d.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"
    # The same text as strftime('%Y-%m-%dT%H:%M:%S.%fZ'), for much less (%-formatting of ints
    # is cheaper than an f-string's format specs; every alert is keyed).
    return "%s@%d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (
        fingerprint,
        d.year,
        d.month,
        d.day,
        d.hour,
        d.minute,
        d.second,
        d.microsecond,
    )


def event_fingerprint(*, source: str, summary: str, component: str = "") -> str:
    """Fingerprint of an Events-API event that has no dedup_key (change events never have one).

    The ingest parser and the simulator both use it, so that a change event replayed through the
    webhook is the same occurrence the simulator's truth names.
    """
    raw = "\x1f".join((source or "", summary or "", component or ""))
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]


_FNV64_OFFSET = 14695981039346656037
_FNV64_PRIME = 1099511628211
_LABEL_SEPARATOR = 0xFF


def labelset_fingerprint(labels: Mapping[str, str]) -> str:
    """Alertmanager's fingerprint of a label set (prometheus/common model.LabelSet.Fingerprint):
    FNV-1a 64 over the sorted names and values, each followed by a 0xff byte, as 16 hex digits."""
    value = _FNV64_OFFSET
    for name in sorted(labels):
        for part in (name, labels[name]):
            for byte in part.encode("utf-8", "surrogatepass"):
                value = ((value ^ byte) * _FNV64_PRIME) & 0xFFFFFFFFFFFFFFFF
            value = ((value ^ _LABEL_SEPARATOR) * _FNV64_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"
