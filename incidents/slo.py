"""Service-level objectives per model, read by postmortems and the weekly review.

`ROOTLINE_SLO_TARGETS` names a YAML file; without one, DOMAIN.md's objectives hold for every
model: TTFT p99 under 2 s, TPOT p99 under 80 ms, ITL jitter (p99 - p50) under 30 ms, each in 99%
of 5-minute windows, and availability 99.9%. The file overrides any of them, for all models or
per model:

    defaults: {ttft_p99_s: 1.5}
    models:
      meta-llama/Llama-3.1-70B-Instruct: {ttft_p99_s: 3, tpot_p99_s: 0.12}
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any

import yaml
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Objectives:
    ttft_p99_s: float = 2.0
    tpot_p99_s: float = 0.080
    itl_jitter_s: float = 0.030
    window_share: float = 0.99  # the share of 5-minute windows that must meet each latency objective
    availability: float = 0.999


NAMES = tuple(f.name for f in fields(Objectives))


def objectives_for(model: str | None) -> Objectives:
    defaults, per_model = _targets(settings.SLO_TARGETS or "", _mtime(settings.SLO_TARGETS))
    found = per_model.get(model or "")
    if found is None and model and "/" in model:
        found = per_model.get(model.rsplit("/", 1)[1])  # "meta-llama/Llama-3.1-8B" as "Llama-3.1-8B"
    return replace(defaults, **found) if found else defaults


def _mtime(path: str | None) -> float:
    try:
        return os.stat(path).st_mtime if path else 0.0
    except OSError:
        return 0.0


@lru_cache(maxsize=4)
def _targets(path: str, mtime: float) -> tuple[Objectives, dict[str, dict[str, float]]]:
    """The file read once per modification; a bad file stops the caller with what is wrong."""
    if not path:
        return Objectives(), {}
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ImproperlyConfigured(f"ROOTLINE_SLO_TARGETS {path!r} cannot be read: {exc}") from exc
    if not isinstance(raw, dict):
        raise ImproperlyConfigured(f"ROOTLINE_SLO_TARGETS {path!r}: expected a mapping with defaults/models")
    defaults = replace(Objectives(), **_values(raw.get("defaults") or {}, f"{path}: defaults"))
    models = raw.get("models") or {}
    if not isinstance(models, dict):
        raise ImproperlyConfigured(f"ROOTLINE_SLO_TARGETS {path!r}: models must be a mapping of model names")
    return defaults, {
        str(name): _values(values or {}, f"{path}: models.{name}") for name, values in models.items()
    }


def _values(raw: Any, where: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise ImproperlyConfigured(f"ROOTLINE_SLO_TARGETS {where}: expected a mapping")
    unknown = sorted(set(map(str, raw)) - set(NAMES))
    if unknown:
        raise ImproperlyConfigured(f"ROOTLINE_SLO_TARGETS {where}: unknown {unknown}; known: {list(NAMES)}")
    out: dict[str, float] = {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ImproperlyConfigured(f"ROOTLINE_SLO_TARGETS {where}.{name}: expected a positive number")
        out[str(name)] = float(value)
    return out
