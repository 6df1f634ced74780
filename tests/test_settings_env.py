"""Settings come from the environment exactly as the contract's table says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBE = (
    "import json, django; from django.conf import settings; django.setup();"
    "db = settings.DATABASES['default'];"
    "print(json.dumps({'engine': db['ENGINE'], 'name': str(db['NAME']), "
    "'eager': settings.CELERY_TASK_ALWAYS_EAGER,"
    "'debug': settings.DEBUG, 'max_body': settings.MAX_BODY, "
    "'ssl_redirect': getattr(settings, 'SECURE_SSL_REDIRECT', False),"
    "'options': {k: str(v) for k, v in db.get('OPTIONS', {}).items()}}))"
)
ROOTLINE_VARS = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "ROOTLINE_SECRET_KEY",
    "ROOTLINE_DEBUG",
    "ROOTLINE_ALLOWED_HOSTS",
    "ROOTLINE_HTTPS",
    "ROOTLINE_MAX_BODY",
    "DJANGO_SETTINGS_MODULE",
)


def run_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items() if key not in ROOTLINE_VARS}
    clean.update({"DJANGO_SETTINGS_MODULE": "rootline.settings", "ROOTLINE_DATA_DIR": str(tmp_path), **env})
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60
    )


def test_nothing_configured_gives_sqlite_eager_celery_and_debug_off(tmp_path):
    result = run_settings(tmp_path)
    assert result.returncode == 0, result.stderr
    probed = json.loads(result.stdout)
    assert probed["engine"] == "django.db.backends.sqlite3" and probed["name"].startswith(str(tmp_path))
    assert probed["eager"] is True and probed["debug"] is False and probed["max_body"] == 10 * 1024 * 1024
    assert (
        probed["options"]["transaction_mode"] == "IMMEDIATE"
        and "journal_mode=WAL" in probed["options"]["init_command"]
    )
    assert (tmp_path / "secret_key").exists()


def test_database_url_and_broker_select_postgresql_and_a_real_queue(tmp_path):
    result = run_settings(
        tmp_path,
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/x",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/9",
        ROOTLINE_MAX_BODY="2048",
    )
    probed = json.loads(result.stdout)
    assert probed["engine"] == "django.db.backends.postgresql" and probed["name"] == "x"
    assert probed["eager"] is False and probed["max_body"] == 2048


def test_production_without_a_secret_key_refuses_to_start(tmp_path):
    for env in ({"ROOTLINE_HTTPS": "1"}, {"ROOTLINE_ALLOWED_HOSTS": "rootline.example.com"}):
        result = run_settings(tmp_path, **env)
        assert result.returncode != 0
        assert "ROOTLINE_SECRET_KEY is not set" in result.stderr


def test_production_with_a_secret_key_starts_with_https_hardening(tmp_path):
    result = run_settings(tmp_path, ROOTLINE_HTTPS="1", ROOTLINE_SECRET_KEY="x" * 50)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ssl_redirect"] is True


def test_correlation_shards_must_be_a_small_whole_number(tmp_path):
    assert run_settings(tmp_path, ROOTLINE_CORRELATION_SHARDS="3").returncode == 0
    for bad in ("0", "two", "-1", "65"):
        result = run_settings(tmp_path, ROOTLINE_CORRELATION_SHARDS=bad)
        assert (
            result.returncode != 0
            and "ROOTLINE_CORRELATION_SHARDS must be a whole number from 1 to 64" in result.stderr
        ), bad


def test_correlation_pace_is_whole_milliseconds_up_to_a_minute(tmp_path):
    for good in ("0", "250", "60000"):
        assert run_settings(tmp_path, ROOTLINE_CORRELATION_PACE_MS=good).returncode == 0, good
    for bad in ("-5", "0.5", "fast", "60001"):
        result = run_settings(tmp_path, ROOTLINE_CORRELATION_PACE_MS=bad)
        assert (
            result.returncode != 0
            and "ROOTLINE_CORRELATION_PACE_MS must be a whole number of milliseconds" in result.stderr
        ), bad


def test_correlation_slice_is_a_whole_number_of_alerts_from_100_to_100000(tmp_path):
    for good in ("100", "1000", "100000"):
        assert run_settings(tmp_path, ROOTLINE_CORRELATION_SLICE=good).returncode == 0, good
    for bad in ("99", "0", "-1000", "1e4", "lots", "100001"):
        result = run_settings(tmp_path, ROOTLINE_CORRELATION_SLICE=bad)
        assert (
            result.returncode != 0
            and "ROOTLINE_CORRELATION_SLICE must be a whole number of alerts" in result.stderr
        ), bad


def test_correlation_rank_every_is_whole_milliseconds_up_to_ten_minutes(tmp_path):
    for good in ("0", "5000", "600000"):
        assert run_settings(tmp_path, ROOTLINE_CORRELATION_RANK_EVERY_MS=good).returncode == 0, good
    for bad in ("-1", "2.5", "often", "600001"):
        result = run_settings(tmp_path, ROOTLINE_CORRELATION_RANK_EVERY_MS=bad)
        assert (
            result.returncode != 0
            and "ROOTLINE_CORRELATION_RANK_EVERY_MS must be a whole number of milliseconds" in result.stderr
        ), bad


def test_pending_action_ttl_is_whole_hours_up_to_a_year(tmp_path):
    for good in ("1", "24", "8760"):
        assert run_settings(tmp_path, ROOTLINE_PENDING_ACTION_TTL_HOURS=good).returncode == 0, good
    for bad in ("0", "-1", "1.5", "forever", "8761"):
        result = run_settings(tmp_path, ROOTLINE_PENDING_ACTION_TTL_HOURS=bad)
        assert (
            result.returncode != 0
            and "ROOTLINE_PENDING_ACTION_TTL_HOURS must be a whole number of hours" in result.stderr
        ), bad


@pytest.mark.parametrize(
    "name,unit,good,bad",
    [
        ("ROOTLINE_SWEEP_SECONDS", "seconds", ("1", "60", "3600"), ("0", "-5", "1.5", "3601", "soon")),
        ("ROOTLINE_REQUEUE_AFTER_SECONDS", "seconds", ("1", "120", "86400"), ("0", "2m", "86401")),
        ("ROOTLINE_PROMETHEUS_TIMEOUT_MS", "milliseconds", ("100", "4000", "120000"), ("99", "4s", "120001")),
        ("ROOTLINE_CORRELATION_KEPT_ALERTS", "alerts", ("1000", "200000"), ("999", "1e6", "50000001")),
    ],
)
def test_the_drills_settings_are_bounded_whole_numbers(tmp_path, name, unit, good, bad):
    for value in good:
        assert run_settings(tmp_path, **{name: value}).returncode == 0, value
    for value in bad:
        result = run_settings(tmp_path, **{name: value})
        assert result.returncode != 0 and f"{name} must be a whole number of {unit}" in result.stderr, value


KEPT_PROBE = (
    "import json, django; from django.conf import settings; django.setup();"
    "from rootline.settings import memory_bytes;"
    "print(json.dumps([settings.CORRELATION_KEPT_ALERTS, memory_bytes()]))"
)


@pytest.mark.parametrize("shards", ["1", "2", "4"])
def test_kept_alerts_default_to_a_share_of_memory_split_between_the_shards(tmp_path, shards):
    clean = {key: value for key, value in os.environ.items() if key not in ROOTLINE_VARS}
    clean.pop("ROOTLINE_CORRELATION_KEPT_ALERTS", None)
    clean.update(
        {
            "DJANGO_SETTINGS_MODULE": "rootline.settings",
            "ROOTLINE_DATA_DIR": str(tmp_path),
            "ROOTLINE_CORRELATION_SHARDS": shards,
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", KEPT_PROBE], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60
    )
    kept, memory = json.loads(result.stdout)
    with open("/proc/meminfo") as meminfo:
        total = int(meminfo.readline().split()[1]) * 1024  # MemTotal, kB
    assert memory <= total * 1.01
    assert kept == max(50_000, int(memory * 0.4 / int(shards) / 10_000))
