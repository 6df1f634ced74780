"""Shared fixtures: integrations, webhook posting, and the real services some tests need.

With REQUIRE_SERVICES=1 (CI), a test that lacks a service or binary fails instead of skipping,
so nothing real is silently left out.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
BINARIES = {
    "prometheus": ("PROMETHEUS_BIN", ["prometheus"]),
    "promtool": ("PROMTOOL_BIN", ["promtool"]),
    "alertmanager": ("ALERTMANAGER_BIN", ["prometheus-alertmanager", "alertmanager"]),
    "chromium": ("CHROMIUM_BIN", ["chromium", "chromium-browser"]),
}


def services_required() -> bool:
    return os.environ.get("REQUIRE_SERVICES", "") not in ("", "0")


def missing(reason: str) -> None:
    if services_required():
        pytest.fail(f"REQUIRE_SERVICES=1 but {reason}")
    pytest.skip(reason)


def require_binary(name: str) -> str:
    variable, candidates = BINARIES[name]
    explicit = os.environ.get(variable)
    if explicit:
        if not os.access(explicit, os.X_OK):
            missing(f"{variable}={explicit} is not executable")
        return explicit
    for candidate in candidates:
        found = shutil.which(candidate)
        if found:
            return found
    missing(f"{name} is not on PATH (or set {variable})")
    raise AssertionError("unreachable")


def require_postgres() -> None:
    from django.db import connection

    if connection.vendor != "postgresql":
        missing("this test needs PostgreSQL: set DATABASE_URL")


def require_broker() -> str:
    from django.conf import settings

    url = settings.CELERY_BROKER_URL
    if not url:
        missing("this test needs a Celery broker: set CELERY_BROKER_URL")
    try:
        import redis

        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception as exc:  # noqa: BLE001
        missing(f"broker {url} unreachable: {exc}")
    return url


def stop_process(process) -> None:
    """Terminate a server a test started; kill it if it has not stopped within 15 s."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, *, timeout: float, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture
def make_integration(db):
    from incidents import services

    counter = iter(range(1, 10_000))

    def make(kind: str = "alertmanager", *, rate_limit: float | None = None, token: str | None = None):
        number = next(counter)
        integration, token = services.integration_add(
            kind=kind, name=f"{kind}-{number}", token=token or f"token-{kind}-{number}", rate_limit=rate_limit
        )
        integration.plain_token = token
        return integration

    return make


@pytest.fixture
def post_hook(client):
    """POST raw bytes to an integration's webhook, with its bearer token unless told otherwise."""

    def post(integration, body: bytes | str, *, token: str | None = None, **headers):
        if isinstance(body, str):
            body = body.encode()
        auth = token if token is not None else integration.plain_token
        extra = {"HTTP_AUTHORIZATION": f"Bearer {auth}"} if auth else {}
        extra.update(headers)
        return client.generic("POST", integration.path, body, content_type="application/json", **extra)

    return post


@pytest.fixture(autouse=True)
def unpaced_correlation(settings):
    """Tests call `correlate_key` as a worker would, back to back; paced, it would queue itself
    for later (ROOTLINE_CORRELATION_PACE_MS) and no worker would take it. Pacing has its own tests;
    real workers started by `start_workers` pace as configured."""
    settings.CORRELATION_PACE_SECONDS = 0


@pytest.fixture
def deliver(post_hook, django_capture_on_commit_callbacks):
    """POST through the URL, then run the processing task function inline (no global eager
    Celery: the enqueue is captured, and the task is called as the worker would call it).
    Unpaced (see `unpaced_correlation`)."""
    from incidents.models import Alert
    from incidents.tasks import correlate_key, process_delivery

    def deliver(integration, body, **kwargs):
        with django_capture_on_commit_callbacks(execute=False):
            response = post_hook(integration, body, **kwargs)
        if response.status_code == 202:
            with django_capture_on_commit_callbacks(execute=False):
                process_delivery(response.json()["delivery"])
            for key in sorted(
                set(Alert.objects.filter(correlated=False).values_list("correlation_key", flat=True))
            ):
                correlate_key(key)
        return response

    return deliver


@pytest.fixture
def wsgi(settings, monkeypatch):
    """rootline.wsgi, both handlers for real, as gunicorn calls them: outside a test transaction
    (they manage the connection per request, as Django's request signals do), deliveries left
    pending. Used by tests/ingest/test_fast_paths.py and tests/incidents/test_hostile_inputs.py."""
    from incidents import flow
    from rootline import wsgi

    assert wsgi.LEAN, "the short webhook path is off: MIDDLEWARE changed?"
    settings.ROOTLINE_INGEST_DRAIN = True
    settings.CELERY_TASK_ALWAYS_EAGER = False
    monkeypatch.setattr(flow, "DRAIN_SIGNALS", flow.DrainSignals(send=lambda: None))
    return wsgi


@pytest.fixture
def start_workers(transactional_db):
    """Start real Celery workers (separate processes) on the configured broker and the test
    database; all are stopped at the end of the test."""
    broker = require_broker()
    require_postgres()
    from django.db import connection

    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST'] or '127.0.0.1'}"
        f":{database['PORT'] or 5432}/{database['NAME']}",
        "CELERY_BROKER_URL": broker,
        "ROOTLINE_SECRET_KEY": "test-worker",
        "ROOTLINE_DATA_DIR": str(ROOT / "var" / "test-worker"),
    }
    import redis

    redis.Redis.from_url(broker).flushdb()
    processes: list[subprocess.Popen] = []

    def start(
        count: int = 1,
        concurrency: int = 2,
        *,
        queues: str | None = None,
        extra_env: dict | None = None,
        log: Path | None = None,
    ) -> list[subprocess.Popen]:
        """`count` workers on `queues` (default: ingestion, correlation and evidence); with `log`, at INFO
        level into that file."""
        from django.conf import settings

        from rootline.celery import app

        for _ in range(count):
            name = f"test-{os.getpid()}-{len(processes)}@%h"
            output = open(log, "ab") if log else subprocess.DEVNULL
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "rootline",
                        "worker",
                        "--loglevel",
                        "INFO" if log else "WARNING",
                        "--concurrency",
                        str(concurrency),
                        "-Q",
                        queues
                        or f"rootline,{settings.CELERY_CORRELATION_QUEUE},{settings.CELERY_EVIDENCE_QUEUE}",
                        "--without-heartbeat",
                        "--without-mingle",
                        "--without-gossip",
                        "-n",
                        name,
                    ],
                    cwd=ROOT,
                    env={**env, **(extra_env or {})},
                    stdout=output,
                    stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
                )
            )
        wait_until(
            lambda: len(app.control.ping(timeout=0.5) or []) >= len(processes),
            timeout=45,
            what=f"{len(processes)} Celery workers to answer a ping",
        )
        return processes

    yield start
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def celery_worker_process(start_workers):
    """One real Celery worker."""
    return start_workers(1)[0]
