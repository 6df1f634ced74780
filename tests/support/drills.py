"""The machinery of the fault and load drills: a PostgreSQL cluster and a Redis of their own on
free ports (never the 5432 / 6379 the suite uses, so stopping them disturbs nothing else), Rootline's
processes against them as `bin/serve` runs them (gunicorn, a Celery worker per queue, beat), and
what a drill reads back from the database. Used by tests/drills/ (the quick drills, in CI) and by
bench/drills/ (the long load runs). Nothing here imports Django (only the pure `correlate`, for
Alertmanager's fingerprints): the drills look at Rootline from outside, as its operators do."""

from __future__ import annotations

import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import requests

from correlate.simulator.core import am_fingerprint

ROOT = Path(__file__).resolve().parents[2]
# gunicorn's access log line of a webhook answer (rootline.gunicorn_logging keeps those >= 400).
WEBHOOK_STATUS = re.compile(r'"POST /hooks/[^"]*" (\d{3}) ')
QUEUES = {"ingestion": "rootline", "correlation": "rootline-correlation", "evidence": "rootline-evidence"}


class DrillError(RuntimeError):
    """A drill's component could not be started or did not behave."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise DrillError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def postgres_bindir() -> str | None:
    """The newest PostgreSQL server binaries Debian installed (`initdb` is not on PATH there)."""
    explicit = os.environ.get("PG_BINDIR")
    if explicit:
        return explicit
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return str(Path(found[-1]).parent)
    initdb = shutil.which("initdb")
    return str(Path(initdb).parent) if initdb else None


def redis_binary() -> str | None:
    return os.environ.get("REDIS_SERVER_BIN") or shutil.which("redis-server")


def what_is_missing() -> str:
    """'' when a drill can run here, else what it lacks."""
    if postgres_bindir() is None:
        return "PostgreSQL's server binaries (initdb, pg_ctl) are not installed (or set PG_BINDIR)"
    if redis_binary() is None:
        return "redis-server is not on PATH (or set REDIS_SERVER_BIN)"
    return ""


class PrivatePostgres:
    """A cluster of its own in a temporary folder, trust authentication, on a free port. As root
    (CI), it runs as the `postgres` user, since PostgreSQL refuses to run as root."""

    def __init__(self, port: int | None = None) -> None:
        bindir = postgres_bindir()
        if bindir is None:
            raise DrillError(what_is_missing())
        self.bindir = Path(bindir)
        self.port = port or free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="rl_drill_pg_"))
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(self.folder, user.pw_uid, user.pw_gid)

    def run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=timeout)

    def init(self) -> PrivatePostgres:
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.folder}'",
            "max_connections": "200",
            "shared_buffers": "128MB",
            "log_min_messages": "warning",
        }
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        return self

    def start(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """`fast`: what a clean shutdown or a failover does to clients (their sessions are cut);
        `immediate`: a crash."""
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", check=False)

    def running(self) -> bool:
        return self.run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        if self.running():
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


class PrivateRedis:
    """redis-server on a free port, nothing persisted; stopped and started again on the same port."""

    def __init__(self, port: int | None = None) -> None:
        binary = redis_binary()
        if binary is None:
            raise DrillError(what_is_missing())
        self.binary = binary
        self.port = port or free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="rl_drill_redis_"))
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"]
            + ["--dir", str(self.folder), "--logfile", str(self.folder / "redis.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self.answers, timeout=20, what=f"redis on {self.port}")

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def url(self, database: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{database}"

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@dataclass
class Process:
    """One of Rootline's processes: started in its own session, so killing it kills its children."""

    name: str
    command: list[str]
    env: dict[str, str]
    log: Path
    popen: subprocess.Popen | None = None

    def start(self) -> Process:
        output = open(self.log, "ab")
        self.popen = subprocess.Popen(
            self.command,
            cwd=ROOT,
            env=self.env,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        output.close()
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """The whole process group: a worker's pool children die with it, as in an OOM kill of
        the container."""
        if self.alive():
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass
            assert self.popen is not None
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class Stack:
    """Rootline as production runs it, against a drill's PostgreSQL and Redis: processes are
    added one by one, so a drill can run two of a kind or kill and restart one."""

    database_url: str
    broker_url: str
    folder: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)
    web_ports: list[int] = field(default_factory=list)
    counter: int = 0
    hook: str = ""  # the path of the drill's Alertmanager webhook

    @property
    def env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("ROOTLINE_", "DJANGO_", "PROMETHEUS_URL", "CELERY_", "DATABASE_URL"))
        }
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "rootline.settings",
                "DATABASE_URL": self.database_url,
                "CELERY_BROKER_URL": self.broker_url,
                "ROOTLINE_SECRET_KEY": "drill-secret-key-not-for-production",
                "ROOTLINE_DATA_DIR": str(self.folder / "data"),
                "ROOTLINE_LOG_LEVEL": "INFO",
                "PYTHONUNBUFFERED": "1",
                **self.extra_env,
            }
        )
        return env

    def manage(self, *args: str, timeout: float = 300) -> str:
        run = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if run.returncode != 0:
            raise DrillError(f"manage.py {' '.join(args)} failed:\n{run.stdout[-2000:]}{run.stderr[-3000:]}")
        return run.stdout

    def migrate(self) -> None:
        self.manage("migrate", "--noinput", "-v0")

    def integration(
        self, kind: str = "alertmanager", token: str | None = None, rate_limit: float | None = None
    ) -> dict[str, Any]:
        self.counter += 1
        args = ["integration", "add", "--kind", kind, "--name", f"drill-{kind}-{self.counter}"]
        if rate_limit is not None:
            args += ["--rate-limit", f"{rate_limit:g}"]
        return json.loads(self.manage(*args, *(["--token", token] if token else [])).strip().splitlines()[-1])

    def url(self, path: str = "/", web: int = 0) -> str:
        """`path` on the `web`-th gunicorn started (round robin over them when `web` is past the last)."""
        return f"http://127.0.0.1:{self.web_ports[web % len(self.web_ports)]}{path}"

    def add(self, name: str, command: list[str]) -> Process:
        self.folder.mkdir(parents=True, exist_ok=True)
        process = Process(name, command, self.env, self.folder / f"{name}.log").start()
        self.processes.append(process)
        return process

    def web(self, workers: int = 2, threads: int = 4) -> Process:
        """A gunicorn as `bin/serve` runs it, on a port of its own (a second call: a second web
        server, as behind a load balancer)."""
        port = free_port()
        self.web_ports.append(port)
        process = self.add(
            f"web-{len(self.web_ports)}",
            [sys.executable, "-m", "gunicorn", "rootline.wsgi", "--bind", f"127.0.0.1:{port}"]
            + ["--workers", str(workers), "--worker-class", "gthread", "--threads", str(threads)]
            + ["--keep-alive", "30", "--access-logfile", "-", "--log-level", "warning"]
            + ["--logger-class", "rootline.gunicorn_logging.AccessLogger"],
        )
        wait_for(
            lambda: self.web_answers(len(self.web_ports) - 1), timeout=60, what="gunicorn to answer /healthz"
        )
        return process

    def web_statuses(self) -> dict[int, int]:
        """How many webhook answers of each status (>= 400: the access log keeps those) the web
        servers gave."""
        counts: dict[int, int] = {}
        for process in self.processes:
            if process.name.startswith("web-") and process.log.exists():
                for status in WEBHOOK_STATUS.findall(process.log.read_text(errors="replace")):
                    counts[int(status)] = counts.get(int(status), 0) + 1
        return counts

    def web_answers(self, web: int = 0) -> bool:
        try:
            return requests.get(self.url("/healthz", web), timeout=2).status_code in (200, 503)
        except requests.RequestException:
            return False

    def worker(self, kind: str, concurrency: int = 1) -> Process:
        """A Celery worker on one queue (`ingestion`, `correlation`, `evidence`), as bin/serve runs each."""
        self.counter += 1
        name = f"{kind}-{self.counter}"
        return self.add(
            name,
            [sys.executable, "-m", "celery", "-A", "rootline", "worker", "--loglevel", "INFO"]
            + ["--concurrency", str(concurrency), "-Q", QUEUES[kind], "-n", f"{name}@%h"]
            + ["--without-heartbeat", "--without-mingle", "--without-gossip"],
        )

    def workers(self, count: int = 1) -> list[Process]:
        return [self.worker(kind) for _ in range(count) for kind in QUEUES]

    def beat(self) -> Process:
        return self.add(
            "beat",
            [sys.executable, "-m", "celery", "-A", "rootline", "beat", "--loglevel", "INFO"]
            + ["--schedule", str(self.folder / "celerybeat-schedule")],
        )

    def restart(self, process: Process) -> Process:
        process.kill()
        return process.start()

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


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
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds * 1000) % 1000:03d}Z"


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


# Prometheus, and a way between it and Rootline that can be made slow ---------------------------


class PrometheusProcess:
    """Debian's prometheus on `data` (backfilled by promtool), stopped and started on one port."""

    def __init__(self, binary: str, data: Path, folder: Path) -> None:
        self.binary, self.data, self.folder = binary, data, folder
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        (folder / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.folder / "prometheus.log", "ab")
        self.process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.data}",
            ]
            + ["--storage.tsdb.retention.time=10y", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        wait_for(self.ready, timeout=60, what="prometheus /-/ready")

    def ready(self) -> bool:
        try:
            return requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None


class SlowProxy:
    """An HTTP forwarder in front of `upstream` that answers after `delay` seconds (a Prometheus
    drowning in queries); with the upstream down, it cuts the connection without an answer, as a
    load balancer in front of a dead Prometheus does. Counts the requests it was sent."""

    def __init__(self, upstream: str, delay: float = 0.0) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.upstream, self.delay, self.requests = upstream.rstrip("/"), delay, 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def forward(self) -> None:
                proxy.requests += 1
                time.sleep(proxy.delay)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")}
                try:
                    answer = requests.request(
                        self.command, proxy.upstream + self.path, data=body, headers=headers, timeout=30
                    )
                except requests.RequestException:
                    self.close_connection = True
                    return
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = forward

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
