"""OpenMetrics files imported into the local series store (`LocalSeries`), merged one row per sample
name and label set: a second import of the same file changes nothing and an overlapping one only
adds what is new. Parsing the file and reading the store back are `incidents/evidence/local.py`."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.db import transaction

from incidents.evidence.local import _dt, parse_openmetrics
from incidents.evidence.points import labels_key, pack_points, unpack_points
from incidents.models import LocalSeries


@dataclass
class ImportResult:
    series: int = 0
    samples: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    start: datetime | None = None
    end: datetime | None = None

    def as_dict(self) -> dict:
        return {
            "series": self.series,
            "samples": self.samples,
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
        }


def local_series_import(*, path: Path | str) -> ImportResult:
    """Merge a file's samples into the store; idempotent (rows whose points do not change are not written)."""
    with open(path, encoding="utf-8") as handle:
        parsed = parse_openmetrics(handle)
    result = ImportResult(series=len(parsed), samples=sum(len(points) for points in parsed.values()))
    by_metric: dict[str, dict[str, tuple[dict[str, str], dict[float, float]]]] = defaultdict(dict)
    for (name, label_pairs), samples in parsed.items():
        as_dict = dict(label_pairs)
        by_metric[name][labels_key(as_dict)] = (as_dict, samples)
    first, last = math.inf, -math.inf
    with transaction.atomic():
        for metric, incoming in by_metric.items():
            existing = {
                row.labels_key: row
                for row in LocalSeries.objects.filter(metric=metric, labels_key__in=list(incoming))
            }
            created, changed = [], []
            for key, (labels, points) in incoming.items():
                row = existing.get(key)
                merged = dict(unpack_points(row.points)) if row else {}
                before = dict(merged)
                merged.update(points)
                ordered = sorted(merged.items())
                first, last = min(first, ordered[0][0]), max(last, ordered[-1][0])
                if row is not None and merged == before:
                    result.unchanged += 1
                    continue
                fields = {
                    "points": pack_points(ordered),
                    "point_count": len(ordered),
                    "start": _dt(ordered[0][0]),
                    "end": _dt(ordered[-1][0]),
                }
                if row is None:
                    created.append(LocalSeries(metric=metric, labels=labels, labels_key=key, **fields))
                else:
                    for name, value in fields.items():
                        setattr(row, name, value)
                    changed.append(row)
            LocalSeries.objects.bulk_create(created, batch_size=500)
            LocalSeries.objects.bulk_update(
                changed, ["points", "point_count", "start", "end"], batch_size=500
            )
            result.created += len(created)
            result.updated += len(changed)
    if parsed:
        result.start, result.end = _dt(first), _dt(last)
    return result
