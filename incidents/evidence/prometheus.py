"""The one module that talks to Prometheus (through prometheus-api-client).

Every failure, whether connection refused, timeout, HTTP error, a PromQL error or an answer
that is not JSON, comes out as `PrometheusError` with the URL and the reason, so that callers
record a gap instead of crashing. Retries are kept to one quick attempt after a 502-504, none
after a timeout (ROOTLINE_PROMETHEUS_TIMEOUT_MS): an incident page or a worker waiting on a dead
or drowning Prometheus is worse than a gap that the next refresh fills.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import requests
from django.conf import settings
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from incidents.evidence.points import RangeSeries


class PrometheusError(Exception):
    """Prometheus could not answer: unreachable, failing, or refusing the query."""

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class PrometheusSource:
    name = "prometheus"

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        retry = Retry(
            total=1,
            connect=0,
            read=0,
            backoff_factor=0.2,
            status_forcelist=(502, 503, 504),
            allowed_methods=None,
        )
        self._client = PrometheusConnect(
            url=self.url, retry=retry, timeout=settings.PROMETHEUS_TIMEOUT_SECONDS
        )

    def close(self) -> None:
        self._client.close()

    def instant(self, promql: str, at: float) -> list[tuple[dict[str, str], float]]:
        """An instant query at `at` (unix seconds): each series' labels and value. Errors as `range`."""
        with asking(self.url):
            result = self._client.custom_query(query=promql, params={"time": f"{at:.3f}"})
        try:
            out = []
            for item in result:
                labels = {k: v for k, v in item.get("metric", {}).items() if k != "__name__"}
                value = item.get("value") or [at, "nan"]
                out.append((labels, float(value[1])))
            return out
        except (AttributeError, TypeError, ValueError, IndexError) as exc:
            raise PrometheusError(f"Prometheus at {self.url} answered unreadably: {exc}"[:600]) from exc

    def range(self, promql: str, start: float, end: float, step: float) -> list[RangeSeries]:
        """A range query; `start`/`end` are unix seconds (whole seconds: the client rounds them)."""
        with asking(self.url):
            result = self._client.custom_query_range(
                query=promql,
                start_time=datetime.fromtimestamp(start, UTC),
                end_time=datetime.fromtimestamp(end, UTC),
                step=f"{step:g}",
            )
        try:
            return [
                RangeSeries(
                    {k: v for k, v in item.get("metric", {}).items() if k != "__name__"},
                    [(float(t), float(v)) for t, v in item.get("values", [])],
                )
                for item in result
            ]
        except (AttributeError, TypeError, ValueError) as exc:
            raise PrometheusError(f"Prometheus at {self.url} answered unreadably: {exc}"[:600]) from exc


@contextmanager
def asking(url: str) -> Iterator[None]:
    """The client's errors as PrometheusError: unreachable (the caller stops asking), refused (a
    bad query) or unreadable."""
    try:
        yield
    except (requests.Timeout, requests.ConnectionError) as exc:
        if timed_out(exc):
            seconds = settings.PROMETHEUS_TIMEOUT_SECONDS
            why = f"did not answer within {seconds:g} s (ROOTLINE_PROMETHEUS_TIMEOUT_MS)"
        else:
            why = f"is unreachable: {type(exc).__name__}"
        raise PrometheusError(f"Prometheus at {url} {why}", unreachable=True) from exc
    except PrometheusApiClientException as exc:
        raise PrometheusError(f"Prometheus at {url} refused the query: {str(exc)[:500]}") from exc
    except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
        raise PrometheusError(f"Prometheus at {url} answered unreadably: {exc}"[:600]) from exc


def timed_out(exc: requests.RequestException) -> bool:
    """A read that timed out: requests says so itself, or (the session retrying 502-504 with no
    read retry left) as a ConnectionError around urllib3's ReadTimeoutError."""
    if isinstance(exc, requests.Timeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, ReadTimeoutError)
