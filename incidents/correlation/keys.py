"""What a correlation key is (the cluster), and how far back a run looks from a new alert."""
from __future__ import annotations

from datetime import timedelta

from correlate.catalog import Catalog
from correlate.topology import CLUSTER_KEYS


def correlation_key_of(labels: dict[str, str]) -> str:
    for name in CLUSTER_KEYS:
        value = labels.get(name)
        if value:
            return value[:255]
    return ""


def lookback(current: Catalog) -> timedelta:
    """How far back a new alert can link: the longest causal lag or grouping window, plus slack.
    Older alerts come in only through the incidents these belong to."""
    settings_ = current.settings
    return max(current.max_rule_lag, settings_.same_mode_window, settings_.tight_scope_window) + settings_.onset_slack
