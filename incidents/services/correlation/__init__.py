"""Correlation inside the app: which key an alert belongs to (`keys`), a run (`run`), what a
process keeps of a key between runs (`state`), and writing a run's result (`sync`). Queueing runs
is `incidents/flow.py`; the pure engine is `correlate/`."""

from incidents.services.correlation.keys import correlation_key_of, lookback
from incidents.services.correlation.run import correlation_rebuild, correlation_run

__all__ = ["correlation_key_of", "correlation_rebuild", "correlation_run", "lookback"]
