"""Small deterministic building blocks: nanosecond clock, Go/RFC 3339 formatting, seeded RNGs,
Alertmanager's label-set fingerprint.

Times are integer nanoseconds since the epoch throughout the simulator, so that formatting
with Go's RFC3339Nano rules (trailing zeros trimmed) is exact and runs are byte-identical.
"""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime

from correlate.events import labelset_fingerprint

NS = 1_000_000_000
MINUTE = 60 * NS
HOUR = 60 * MINUTE
ZERO_TIME = "0001-01-01T00:00:00Z"


def parse_start(text: str) -> int:
    """`--start` as ISO 8601 (a bare date means midnight UTC) -> epoch nanoseconds."""
    value = text.strip()
    if len(value) == 10:
        value += "T00:00:00"
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.replace(microsecond=0).timestamp()) * NS + dt.microsecond * 1000


def day_start(ns: int) -> int:
    """Midnight UTC of the day holding `ns`."""
    return ns - ns % (24 * HOUR)


def go_time(ns: int) -> str:
    """Go's time.RFC3339Nano in UTC: fractional seconds with trailing zeros trimmed."""
    seconds, frac = divmod(ns, NS)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text += "." + f"{frac:09d}".rstrip("0")
    return text + "Z"


def iso_ms(ns: int, style: str = "z") -> str:
    """Change-event timestamps as senders write them: `z` -> ...T01:10:00.123Z, `pd` -> +0000."""
    seconds, frac = divmod(ns, NS)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    text += f".{frac // 1_000_000:03d}"
    return text + ("+0000" if style == "pd" else "Z")


def om_ts(ns: int) -> str:
    """OpenMetrics timestamp: seconds (promtool reads milliseconds as seconds, silently)."""
    seconds, frac = divmod(ns, NS)
    if frac == 0:
        return str(seconds)
    return f"{seconds}.{frac // 1_000_000:03d}".rstrip("0").rstrip(".")


def rng_for(*key: object) -> random.Random:
    """A Random seeded from a stable digest of `key` (never Python's salted hash())."""
    digest = hashlib.sha256("\x1f".join(map(str, key)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def am_fingerprint(labels: dict[str, str]) -> str:
    """Alertmanager's fingerprint of a label set (the one the ingest side computes too)."""
    return labelset_fingerprint(labels)


_K8S_ALNUM = "bcdfghjklmnpqrstvwxz2456789"


def k8s_suffix(rng: random.Random, length: int) -> str:
    """Kubernetes' SafeEncodeString alphabet (no vowels, no 0/1/3), as in pod-template hashes."""
    return "".join(rng.choice(_K8S_ALNUM) for _ in range(length))


def hex_id(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(length))
