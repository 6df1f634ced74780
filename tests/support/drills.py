"""The machinery of the fault and load drills: a PostgreSQL cluster and a Redis of their own on
free ports (never the 5432 / 6379 the suite uses, so stopping them disturbs nothing else), Rootline's
processes against them as `bin/serve` runs them (gunicorn, a Celery worker per queue, beat), and
Debian's Prometheus and a proxy that slows it. What a drill sends and reads back is
tests/support/drill_traffic.py. Used by tests/drills/ (the quick drills, in CI) and by
bench/drills/ (the long load runs). Nothing here imports Django: the drills look at Rootline from
outside, as its operators do."""

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import requests

from tests.support.alertmanager import free_port

__all__ = ["free_port"]  # the drills' ports come from here too
ROOT = Path(__file__).resolve().parents[2]
# gunicorn's access log line of a webhook answer (rootline.gunicorn_logging keeps those >= 400).
WEBHOOK_STATUS = re.compile(r'"POST /hooks/[^"]*" (\d{3}) ')
QUEUES = {"ingestion": "rootline", "correlation": "rootline-correlation", "evidence": "rootline-evidence"}


class DrillError(RuntimeError):
    """A drill's component could not be started or did not behave."""


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
