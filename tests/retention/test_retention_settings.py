"""ROOTLINE_RETAIN_BODIES_DAYS and ROOTLINE_RETAIN_ALERTS_DAYS: whole days within bounds, read as the
contract's table says; the beat schedule runs the prune."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings

from tests.test_settings_env import ROOT, ROOTLINE_VARS

PROBE = (
    "import django; from django.conf import settings; django.setup();"
    "print(settings.RETAIN_BODIES_DAYS, settings.RETAIN_ALERTS_DAYS)"
)


def probe(tmp_path, **env: str) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items() if key not in ROOTLINE_VARS}
    clean = {key: value for key, value in clean.items() if not key.startswith("ROOTLINE_RETAIN_")}
    clean.update({"DJANGO_SETTINGS_MODULE": "rootline.settings", "ROOTLINE_DATA_DIR": str(tmp_path), **env})
    return subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=60
    )


def test_unset_keeps_bodies_30_days_and_alerts_90(tmp_path):
    result = probe(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["30", "90"]
    assert probe(
        tmp_path, ROOTLINE_RETAIN_BODIES_DAYS="7", ROOTLINE_RETAIN_ALERTS_DAYS="365"
    ).stdout.split() == [
        "7",
        "365",
    ]


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("ROOTLINE_RETAIN_BODIES_DAYS", "0"),
        ("ROOTLINE_RETAIN_BODIES_DAYS", "3651"),
        ("ROOTLINE_RETAIN_BODIES_DAYS", "1.5"),
        ("ROOTLINE_RETAIN_ALERTS_DAYS", "6"),  # correlation and the week's review still read them
        ("ROOTLINE_RETAIN_ALERTS_DAYS", "forever"),
    ],
)
def test_a_retention_outside_its_bounds_stops_start_up(tmp_path, name, bad):
    result = probe(tmp_path, **{name: bad})
    assert result.returncode != 0 and f"{name} must be a whole number of days" in result.stderr


def test_beat_prunes_daily_on_the_evidence_worker():
    (entry,) = [e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "incidents.prune"]
    assert entry["schedule"].hour == {3}
    assert settings.CELERY_TASK_ROUTES["incidents.prune"]["queue"] == settings.CELERY_EVIDENCE_QUEUE
