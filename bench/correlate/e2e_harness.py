"""The machinery of `end_to_end.py` around the system under test: the processes (psql, a free
port, waiting for HTTP, stopping `bin/serve`'s process group, its workers' pids) and the
measuring (the senders that post the storm open loop, the poller that reads each delivery's
progress from PostgreSQL, percentiles, the workers' task times from their log). `end_to_end.py`
builds the storm and runs a case with these."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

# Processes ---------------------------------------------------------------------------------------


def psql(sql: str, db: str = "postgres") -> str:
    return subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", db, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def freeport() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_http(url: str, secs: float) -> bool:
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if 200 <= r.status < 300:
                    return True
        except OSError:
            pass
        time.sleep(0.3)
    return False


def stop_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # bin/serve's trap stops gunicorn, workers, beat
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass


def group_pids(pgid: int, pattern: str) -> list[int]:
    out = subprocess.run(
        ["pgrep", "-g", str(pgid), "-f", pattern], capture_output=True, text=True
    ).stdout.split()
    return [int(p) for p in out]


# Measuring ---------------------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    k = (len(values) - 1) * p
    f = int(k)
    c = min(f + 1, len(values) - 1)
    return values[f] + (values[c] - values[f]) * (k - f)


def summary(values: list[float]) -> dict:
    v = sorted(values)
    r = lambda x: None if x is None else round(x * 1000, 1)  # noqa: E731 - ms
    return {
        "n": len(v),
        "p50_ms": r(pct(v, 0.5)),
        "p90_ms": r(pct(v, 0.9)),
        "p99_ms": r(pct(v, 0.99)),
        "max_ms": r(v[-1] if v else None),
    }


class Deliveries:
    """Delivery id -> 202 time and alert count, filled by the senders, read by the poller."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: dict[int, tuple[float, int]] = {}
        self.status: dict[int, int] = {}
        self.errors: list[str] = []
        self.lat: list[float] = []
        self.last_202 = 0.0

    def add(self, delivery: int, t: float, n: int) -> None:
        with self.lock:
            self.items[delivery] = (t, n)
            self.last_202 = max(self.last_202, t)


def sender(bodies, start_at, url, token, out: Deliveries, next_index, stop_at) -> None:
    """Send the bodies whose turn comes, on one keep-alive connection (http.client: the sender
    shares the 2 cores with the system under test, and `requests` costs far more CPU a request,
    taken from the system under test for work Alertmanager does on machines of its own)."""
    import http.client
    from urllib.parse import urlsplit

    target = urlsplit(url)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connection = None
    while True:
        with next_index[1]:
            i = next_index[0]
            next_index[0] += 1
        if i >= len(bodies) or time.time() > stop_at:
            if connection is not None:
                connection.close()
            return
        offset, n, data = bodies[i]
        delay = start_at + offset - time.time()
        if delay > 0:
            time.sleep(delay)
        t_send = time.time()
        try:
            if connection is None:
                connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            connection.request("POST", target.path, body=data, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            t = time.time()
            with out.lock:
                out.status[response.status] = out.status.get(response.status, 0) + 1
                out.lat.append(t - t_send)
            if response.status == 202:
                out.add(int(json.loads(payload)["delivery"]), t, n)
            else:
                with out.lock:
                    out.errors.append(f"{response.status} {payload[:200].decode(errors='replace')}")
            if response.will_close:
                connection.close()
                connection = None
        except Exception as exc:  # noqa: BLE001 - count and continue on a fresh connection
            if connection is not None:
                connection.close()
                connection = None
            with out.lock:
                out.errors.append(repr(exc)[:200])


def poller(
    dsn: str,
    out: Deliveries,
    interval: float,
    done: threading.Event,
    deadline_box: list[float],
    result: dict,
    share: float = 0.1,
) -> None:
    """Per open delivery: stored / correlated / in-incident counts; each increase is that many
    alerts reaching the state at this poll's start time. Polls take at most `share` of the time
    (a poll over a large backlog costs PostgreSQL more, and PostgreSQL shares the 2 cores with
    the system under test), so the interval grows while a backlog lasts."""
    import psycopg

    conn = psycopg.connect(dsn, autocommit=True)
    progress: dict[int, list[int]] = {}  # delivery -> [stored, correlated, incident]
    lat = {"stored": [], "correlated": [], "incident": []}
    closed: set[int] = set()
    polls, poll_time, last_change = 0, 0.0, time.time()
    previous_poll, widest_gap = None, 0.0
    began = time.time()
    first_incident_at = last_incident_at = None
    while True:
        with out.lock:
            open_ids = [d for d in out.items if d not in closed]
        t = time.time()
        if previous_poll is not None:
            widest_gap = max(widest_gap, t - previous_poll)
        previous_poll = t
        if open_ids:
            rows = conn.execute(
                "SELECT first_delivery_id, count(*), count(*) FILTER (WHERE correlated),"
                " count(*) FILTER (WHERE incident_id IS NOT NULL) FROM incidents_alert"
                " WHERE first_delivery_id = ANY(%s) GROUP BY 1",
                [open_ids],
            ).fetchall()
            polls += 1
            poll_time += time.time() - t
            for delivery, *counts in rows:
                t202, n = out.items[delivery]
                seen = progress.setdefault(delivery, [0, 0, 0])
                for k, name in enumerate(("stored", "correlated", "incident")):
                    if counts[k] > seen[k]:
                        lat[name].extend([t - t202] * (counts[k] - seen[k]))
                        seen[k] = counts[k]
                        last_change = t
                        if name == "incident":
                            first_incident_at = first_incident_at or t
                            last_incident_at = t
                if seen[2] >= n or (seen[1] >= n and seen[0] >= n and t - last_change > 3):
                    closed.add(delivery)
        if done.is_set():
            with out.lock:
                all_closed = len(closed) == len(out.items)
            if all_closed or time.time() > deadline_box[0]:
                break
        took = time.time() - t
        time.sleep(max(interval - took, took * (1 / share - 1)))
    conn.close()
    result.update(
        lat=lat,
        polls=polls,
        mean_poll_ms=round(poll_time / max(polls, 1) * 1000, 1),
        mean_poll_interval_ms=round((time.time() - began) / max(polls, 1) * 1000, 1),
        widest_poll_gap_ms=round(widest_gap * 1000, 1),
        first_incident_at=first_incident_at,
        last_incident_at=last_incident_at,
        open_at_end=len(out.items) - len(closed),
    )


CELERY_DONE = re.compile(
    r"incidents\.(correlate_key|process_pending_deliveries|process_delivery)"
    r"\[[^\]]+\] succeeded in ([0-9.]+)s"
)
RUN_PATH = re.compile(r"correlated \S* from the (kept state|window \([^)]*\))")


def task_times(log: Path) -> dict:
    runs: dict[str, list[float]] = {}
    for line in log.read_text(errors="replace").splitlines():
        m = CELERY_DONE.search(line)
        if m:
            runs.setdefault(m.group(1), []).append(float(m.group(2)))
    paths = {}
    for m in RUN_PATH.finditer(log.read_text(errors="replace")):
        paths[m.group(1)] = paths.get(m.group(1), 0) + 1
    out = {"correlation_paths": paths} if paths else {}
    for name, values in runs.items():
        v = sorted(values)
        out[name] = {
            "runs": len(v),
            "total_s": round(sum(v), 1),
            "p50_s": round(pct(v, 0.5), 3),
            "max_s": round(v[-1], 3),
        }
    return out
