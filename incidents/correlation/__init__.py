"""Correlation inside the app: which key an alert belongs to (`keys`), queueing runs per key
(`enqueue`), a run (`run`), what a process keeps of a key between runs (`state`), and writing a
run's result (`sync`). The pure engine is `correlate/`."""
from incidents.correlation.enqueue import (
    correlation_enqueue, correlation_enqueue_now, correlation_queue, correlation_requeue_waiting, pace_wait, pending_flag, ranking_flag,
)
from incidents.correlation.keys import correlation_key_of, lookback
from incidents.correlation.run import correlation_rebuild, correlation_run

__all__ = [
    "correlation_enqueue", "correlation_enqueue_now", "correlation_queue", "correlation_key_of", "correlation_rebuild",
    "correlation_requeue_waiting",
    "correlation_run", "lookback", "pace_wait", "pending_flag", "ranking_flag",
]
