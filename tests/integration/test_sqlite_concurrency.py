"""The demo default (SQLite) under parallel deliveries: they queue, they do not fail.

Runs a real multi-process gunicorn on a SQLite file, the way `make serve` would without
DATABASE_URL, and posts from 8 threads at once."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from tests.conftest import ROOT, free_port, wait_until

CLEARED = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "DJANGO_SETTINGS_MODULE",
    "ROOTLINE_ALLOWED_HOSTS",
    "ROOTLINE_HTTPS",
)


def manage(env: dict, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_parallel_deliveries_on_sqlite_all_succeed_and_are_all_stored(tmp_path: Path):
    env = {key: value for key, value in os.environ.items() if key not in CLEARED}
    env.update({"ROOTLINE_DATA_DIR": str(tmp_path), "ROOTLINE_SECRET_KEY": "sqlite-concurrency"})
    manage(env, "migrate", "--noinput", "-v0")
    created = json.loads(manage(env, "integration", "add", "--kind", "alertmanager", "--name", "sqlite"))
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "rootline.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "4",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}{created['url']}"
        wait_until(lambda: _up(f"http://127.0.0.1:{port}/healthz"), timeout=30, what="gunicorn on SQLite")

        def send(sender: int) -> list[int]:
            session = requests.Session()
            session.headers["Authorization"] = f"Bearer {created['token']}"
            codes = []
            for n in range(25):
                alerts = [
                    {
                        "labels": {
                            "alertname": "VLLMKVCacheHigh",
                            "pod": f"vllm-{sender}-{n}-{k}",
                            "cluster": f"c{sender}",
                        },
                        "status": "firing",
                        "startsAt": "2026-11-29T01:00:00Z",
                    }
                    for k in range(5)
                ]
                codes.append(
                    session.post(
                        url, data=json.dumps({"version": "4", "alerts": alerts}), timeout=30
                    ).status_code
                )
            return codes

        with ThreadPoolExecutor(8) as pool:
            codes = [code for batch in pool.map(send, range(8)) for code in batch]
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert codes.count(202) == len(codes) == 200, sorted(set(codes))
    database = sqlite3.connect(tmp_path / "rootline.sqlite3")
    assert database.execute("select count(*) from incidents_alert").fetchone()[0] == 1000
    assert (
        database.execute("select count(*) from incidents_delivery where status = 'processed'").fetchone()[0]
        == 200
    )
    assert database.execute("pragma journal_mode").fetchone()[0] == "wal"


def _up(url: str) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False
