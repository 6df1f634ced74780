"""What a drill sends and what it reads back: cascades of alerts as Alertmanager's API and
webhook carry them, a sender that retries as Alertmanager's notifier does, and the ledger of
Rootline's tables a drill checks (tests/drills/, bench/drills/load.py). The processes they run
against are tests/support/drills.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
import requests

from correlate.simulator.core import am_fingerprint
from tests.support import alertmanager

# What a drill reads back ---------------------------------------------------------------------


class Ledger:
    """Rootline's tables as a drill checks them, over its own connection (opened per question:
    the database may have been stopped in between)."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url

    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        with psycopg.connect(self.database_url, connect_timeout=5) as conn:
            return conn.execute(sql, tuple(params)).fetchall()

    def value(self, sql: str, params: Iterable[Any] = ()) -> Any:
        return self.rows(sql, params)[0][0]

    def deliveries(self) -> dict[str, int]:
        return dict(self.rows("SELECT status, count(*) FROM incidents_delivery GROUP BY status"))

    def occurrences(self) -> list[tuple[str, str]]:
        """(fingerprint, startsAt as ISO text) of every stored alert."""
        rows = self.rows("SELECT fingerprint, starts_at FROM incidents_alert WHERE kind = 'alert'")
        return [(fingerprint, starts.isoformat()) for fingerprint, starts in rows]

    def uncorrelated(self) -> int:
        return self.value("SELECT count(*) FROM incidents_alert WHERE NOT correlated")

    def settled(self, expected_alerts: int) -> bool:
        """Every delivery processed, `expected_alerts` stored, all correlated."""
        try:
            pending = self.value(
                "SELECT count(*) FROM incidents_delivery WHERE status IN ('pending', 'failed')"
            )
            stored = self.value("SELECT count(*) FROM incidents_alert")
            return pending == 0 and stored >= expected_alerts and self.uncorrelated() == 0
        except psycopg.Error:
            return False

    def incidents_by_key(self) -> dict[str, list[int]]:
        rows = self.rows(
            "SELECT correlation_key, id FROM incidents_incident WHERE merged_into_id IS NULL ORDER BY id"
        )
        out: dict[str, list[int]] = {}
        for key, pk in rows:
            out.setdefault(key, []).append(pk)
        return out

    def alerts_without_incident(self) -> int:
        return self.value("SELECT count(*) FROM incidents_alert WHERE incident_id IS NULL")

    def duplicate_roots(self) -> list[tuple]:
        """Two visible incidents rooted at the same alert: one cascade opened twice."""
        return self.rows(
            "SELECT root_alert_id, count(*) FROM incidents_incident WHERE merged_into_id IS NULL "
            "AND root_alert_id IS NOT NULL GROUP BY root_alert_id HAVING count(*) > 1"
        )

    def duplicate_edges(self) -> list[tuple]:
        """A causal link written twice: a correlation run applied twice."""
        return self.rows(
            "SELECT incident_id, cause_id, effect_id, count(*) FROM incidents_incidentedge "
            "GROUP BY incident_id, cause_id, effect_id HAVING count(*) > 1"
        )

    def evidence(self) -> dict[int, tuple[Any, int, int]]:
        """Each visible incident's (evidence_collected_at, series rows, gap rows)."""
        rows = self.rows(
            "SELECT i.id, i.evidence_collected_at, "
            "(SELECT count(*) FROM incidents_evidenceseries s WHERE s.incident_id = i.id), "
            "(SELECT count(*) FROM incidents_evidencegap g WHERE g.incident_id = i.id) "
            "FROM incidents_incident i WHERE i.merged_into_id IS NULL ORDER BY i.id"
        )
        return {pk: (collected, series, gaps) for pk, collected, series, gaps in rows}

    def gap_errors(self) -> list[str]:
        return [error for (error,) in self.rows("SELECT DISTINCT error FROM incidents_evidencegap")]

    def open_transactions(self, older_than: float = 0.0) -> int:
        """Other sessions inside a transaction open for over `older_than` seconds (the drill's own
        excluded): a worker mid-task."""
        return self.value(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND xact_start < now() - make_interval(secs => %s) AND pid <> pg_backend_pid()",
            [older_than],
        )


# What a drill sends ---------------------------------------------------------------------------


def rfc3339(seconds: float) -> str:
    """Unix seconds as Alertmanager writes times (tests/support/alertmanager.py's form)."""
    return alertmanager.rfc3339(datetime.fromtimestamp(seconds, UTC))


# A cascade of the March incident's kind on one deployment (DOMAIN.md): fragmentation, the KV pool
# full, the OOM kill, the crash loop, queueing on the siblings, the model's TTFT breach.
CASCADE = (
    ("LLMKVFragmentationHigh", "pod", 0),
    ("LLMKVCachePoolUtilizationHigh", "pod", 4),
    ("LLMContainerOOMKilled", "pod", 8),
    ("KubePodCrashLooping", "pod", 10),
    ("LLMQueueWaitHigh", "sibling", 12),
    ("LLMTTFTp99High", "model", 14),
)
SEVERITY = {"LLMContainerOOMKilled": "critical", "LLMTTFTp99High": "critical"}


def cascade_alerts(cluster: str, pods: int, t0: float, run: str) -> list[dict[str, Any]]:
    """One cluster's cascade over `pods` pods of one deployment, as Alertmanager's API takes
    alerts (labels, annotations, startsAt; endsAt an hour ahead: firing). `run` makes every
    drill's alerts new occurrences."""
    model = f"llama-3.1-8b-{run}"
    deployment = f"vllm-{model}"
    names = [f"{deployment}-7d9f8b6c4-{index:05d}" for index in range(pods)]
    alerts = []
    for alertname, kind, lag in CASCADE:
        for index, pod in enumerate(names):
            labels = {
                "alertname": alertname,
                "cluster": cluster,
                "namespace": "llm-serving",
                "severity": SEVERITY.get(alertname, "warning"),
                "model_name": model,
            }
            if kind == "pod":
                labels.update(pod=pod, container="vllm", node=f"gpu-node-{index // 4:03d}")
            elif kind == "sibling":
                labels.update(pod=names[index ^ 1], container="vllm")
            elif index:
                continue  # a model's alert is one alert
            alerts.append(
                {
                    "labels": labels,
                    "annotations": {"summary": f"{alertname} on {labels.get('pod', model)}"},
                    "startsAt": rfc3339(t0 + lag),
                    "endsAt": rfc3339(t0 + 3600),
                }
            )
    return alerts


def grouped_bodies(alerts: list[dict[str, Any]], per_body: int = 10_000) -> list[bytes]:
    """Webhook bodies as Alertmanager grouped by (cluster, alertname) sends them, at most
    `per_body` alerts each."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for alert in alerts:
        groups.setdefault((alert["labels"]["cluster"], alert["labels"]["alertname"]), []).append(alert)
    return [
        webhook_body(group[start : start + per_body])
        for group in groups.values()
        for start in range(0, len(group), per_body)
    ]


def webhook_body(alerts: list[dict[str, Any]]) -> bytes:
    """An Alertmanager webhook body (version 4) of these alerts, as Alertmanager groups them."""
    common = {k: v for k, v in alerts[0]["labels"].items() if all(a["labels"].get(k) == v for a in alerts)}
    body = {
        "version": "4",
        "receiver": "rootline",
        "status": "resolved" if all(a.get("status") == "resolved" for a in alerts) else "firing",
        "groupKey": "{}:" + json.dumps(common, sort_keys=True),
        "truncatedAlerts": 0,
        "groupLabels": {k: common[k] for k in ("alertname", "cluster") if k in common},
        "commonLabels": common,
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.monitoring:9093",
        "alerts": [
            {
                "status": a.get("status", "firing"),
                "labels": a["labels"],
                "annotations": a["annotations"],
                "startsAt": a["startsAt"],
                "endsAt": a["endsAt"] if a.get("status") == "resolved" else "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus.monitoring:9090/graph",
                "fingerprint": am_fingerprint(a["labels"]),
            }
            for a in alerts
        ],
    }
    return json.dumps(body).encode()


# A sender as Alertmanager is one -----------------------------------------------------------------


@dataclass
class Attempt:
    status: int  # 0: no answer (connection refused or cut, timeout)
    seconds: float
    at: float  # time.time() when it was sent


@dataclass
class Sent:
    """What a sender saw: every attempt's answer, and the bodies it gave up on."""

    attempts: list[Attempt] = field(default_factory=list)
    given_up: int = 0
    delivered: int = 0

    def statuses(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for attempt in self.attempts:
            counts[attempt.status] = counts.get(attempt.status, 0) + 1
        return counts

    def percentile(self, share: float) -> float:
        times = sorted(a.seconds for a in self.attempts if 200 <= a.status < 300)
        return times[min(len(times) - 1, int(share * len(times)))] if times else float("nan")


class Sender:
    """Posts webhook bodies from `threads` threads as Alertmanager's notifier does: a 5xx, a
    connection error or a timeout is retried with exponential backoff (AM: from 10 ms, doubling,
    at most its group interval; here `first_backoff` to `max_backoff`) until `give_up_after`; a 2xx
    or 4xx ends it. Over `urls` in turn (two web servers behind one balancer)."""

    def __init__(
        self,
        urls: list[str],
        token: str,
        *,
        threads: int = 4,
        timeout: float = 10,
        first_backoff: float = 0.1,
        max_backoff: float = 5,
        give_up_after: float = 300,
    ) -> None:
        self.urls, self.token, self.threads, self.timeout = urls, token, threads, timeout
        self.first_backoff, self.max_backoff, self.give_up_after = first_backoff, max_backoff, give_up_after
        self.local = threading.local()
        self.lock = threading.Lock()
        self.sent = Sent()

    def session(self) -> requests.Session:
        if not hasattr(self.local, "session"):
            self.local.session = requests.Session()
            self.local.session.headers.update(
                {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
            )
        return self.local.session

    def post(self, number: int, body: bytes) -> bool:
        """One body until it is answered for good; True if it was accepted (2xx)."""
        started, backoff = time.monotonic(), self.first_backoff
        url = self.urls[number % len(self.urls)]
        while True:
            at, clock = time.time(), time.monotonic()
            try:
                status = self.session().post(url, data=body, timeout=self.timeout).status_code
            except requests.RequestException:
                status = 0
            attempt = Attempt(status, time.monotonic() - clock, at)
            with self.lock:
                self.sent.attempts.append(attempt)
            if 200 <= status < 500:
                with self.lock:
                    self.sent.delivered += 200 <= status < 300
                return 200 <= status < 300
            if time.monotonic() - started > self.give_up_after:
                with self.lock:
                    self.sent.given_up += 1
                return False
            time.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff)

    def send(self, bodies: Iterable[bytes]) -> Sent:
        with ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(lambda item: self.post(*item), enumerate(bodies)))
        return self.sent
