"""What a correlation key is (the cluster), and how far back a run looks from a new alert."""

from __future__ import annotations

from datetime import timedelta

from correlate.catalog import Catalog
from correlate.topology import cluster_of


def correlation_key_of(labels: dict[str, str]) -> str:
    """The key correlation runs are serialised by: the alert's cluster (the engine's partition)."""
    return cluster_of(labels)[:255]


def lookback(current: Catalog) -> timedelta:
    """How far back a new alert can link: the longest causal lag or grouping window, plus slack.
    Older alerts come in only through the incidents these belong to."""
    settings_ = current.settings
    return (
        max(current.max_rule_lag, settings_.same_mode_window, settings_.tight_scope_window)
        + settings_.onset_slack
    )
