"""Compact storage of a series' points: (unix seconds, value) pairs as little-endian float64,
zlib-compressed: a smooth series' points take a small fraction of the room JSON would."""

from __future__ import annotations

import hashlib
import json
import math
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

_PAIR = struct.Struct("<dd")


def pack_points(points: Iterable[tuple[float, float]]) -> bytes:
    raw = b"".join(_PAIR.pack(float(t), float(v)) for t, v in points)
    return zlib.compress(raw, 6)


def unpack_points(blob: bytes | memoryview) -> list[tuple[float, float]]:
    raw = zlib.decompress(bytes(blob))
    return [(t, v) for t, v in _PAIR.iter_unpack(raw)]


def finite(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """NaN marks a gap (a stale or missing scrape); charts and crossings skip it."""
    return [(t, v) for t, v in points if not math.isnan(v)]


def labels_key(labels: dict[str, str]) -> str:
    """Stable identity of a label set (sha256 of the sorted pairs), for unique constraints."""
    return hashlib.sha256(json.dumps(sorted(labels.items()), separators=(",", ":")).encode()).hexdigest()


@dataclass
class RangeSeries:
    """One series of a range read, whatever answered it (Prometheus or the local store)."""

    labels: dict[str, str]
    points: list[tuple[float, float]] = field(default_factory=list)
