"""The review's objectives from a real Prometheus: raw vLLM histograms and counters backfilled
with promtool, the rules pack's recording rules evaluated over them by `promtool tsdb
create-blocks-from rules`, then read back by the review as it reads any Prometheus."""

from __future__ import annotations

import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from incidents.models import Incident
from incidents.review.report import review
from incidents.review.weeks import Week
from tests.conftest import free_port, require_binary, stop_process, wait_until
from tests.evidence.conftest import _ready

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
WEEK = Week.last_complete(datetime.now(UTC))
DATA_FROM = WEEK.start + timedelta(days=1)  # Tuesday 00:00-06:00 UTC of the last complete week
DATA_TO = DATA_FROM + timedelta(hours=6)
BAD_FROM, BAD_TO = DATA_FROM + timedelta(hours=2), DATA_FROM + timedelta(hours=3)
BUCKETS = ("0.5", "1", "2", "5", "+Inf")


def raw_openmetrics() -> str:
    """10 requests/s; in the bad hour all of them take 2-5 s to the first token and 1% fail;
    aborts (the client leaving) all the time. Scraped every minute."""
    lines = [
        "# TYPE vllm:time_to_first_token_seconds histogram",
        "# TYPE vllm:request_success counter",
    ]
    counts = dict.fromkeys(BUCKETS, 0)
    finished = {"stop": 0, "abort": 0, "error": 0}
    at = DATA_FROM
    labels = f'model_name="{MODEL}",namespace="llm"'
    while at <= DATA_TO:
        bad = BAD_FROM < at <= BAD_TO
        for le in BUCKETS:
            counts[le] += 600 if (not bad or le in ("5", "+Inf")) else 0
        finished["stop"] += 600
        finished["abort"] += 60
        finished["error"] += 6 if bad else 0
        ts = int(at.timestamp())
        lines += [
            f'vllm:time_to_first_token_seconds_bucket{{{labels},le="{le}"}} {counts[le]} {ts}'
            for le in BUCKETS
        ]
        lines += [
            f'vllm:request_success_total{{{labels},finished_reason="{r}"}} {n} {ts}'
            for r, n in finished.items()
        ]
        at += timedelta(minutes=1)
    return "\n".join([*lines, "# EOF", ""])


def start_prometheus(folder: Path) -> tuple[subprocess.Popen, str]:
    (folder / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")
    port = free_port()
    process = subprocess.Popen(
        [require_binary("prometheus"), f"--config.file={folder / 'prometheus.yml'}",
         f"--storage.tsdb.path={folder / 'data'}", "--storage.tsdb.retention.time=10y",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=(folder / "prometheus.log").open("ab"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _ready(url), timeout=30, what="prometheus /-/ready")
    return process, url


@pytest.fixture(scope="module")
def prometheus_with_recordings(tmp_path_factory):
    promtool = require_binary("promtool")
    folder = tmp_path_factory.mktemp("review-tsdb")
    (folder / "raw.om").write_text(raw_openmetrics())
    backfill = [
        promtool,
        "tsdb",
        "create-blocks-from",
        "openmetrics",
        str(folder / "raw.om"),
        str(folder / "data"),
    ]
    subprocess.run(backfill, check=True, capture_output=True, timeout=120)
    process, url = start_prometheus(folder)
    try:
        made = subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "rules", f"--start={int(DATA_FROM.timestamp())}",
             f"--end={int((DATA_TO + timedelta(minutes=10)).timestamp())}", f"--url={url}",
             f"--output-dir={folder / 'recorded'}", "--eval-interval=60s", str(ROOT / "rules" / "vllm.yml")],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr[-2000:]
    finally:
        stop_process(process)
    for block in (folder / "recorded").iterdir():
        if block.is_dir():
            shutil.move(str(block), str(folder / "data" / block.name))
    process, url = start_prometheus(folder)
    try:
        yield url
    finally:
        stop_process(process)


def test_attainment_and_budget_from_recording_rules_over_backfilled_history(
    prometheus_with_recordings, settings
):
    settings.PROMETHEUS_URL = prometheus_with_recordings
    hit = Incident.objects.create(
        title="TTFT breach", started_at=BAD_FROM, resolved_at=BAD_TO + timedelta(minutes=10),
        status="resolved", severity="critical", scope={"model": MODEL, "cluster": "prod"},
    )  # fmt: skip
    Incident.objects.create(
        title="elsewhere", started_at=BAD_FROM, severity="warning", scope={"model": "other-model"}
    )
    figures = review(WEEK, timezone.now())
    rows = {(row["model"], row["sli"]): row for row in figures["objectives"]}
    ttft = rows[(MODEL, "ttft_p99")]
    # Six hours of data: 72 five-minute windows (one more while the last sample is fresh).
    assert 72 <= ttft["windows"] <= 74
    assert 11 <= ttft["windows_missed"] <= 13  # the bad hour, give or take the edges' rate windows
    assert ttft["attainment"] == pytest.approx(1 - ttft["windows_missed"] / ttft["windows"], abs=1e-6)
    assert ttft["budget_burned"] == pytest.approx(ttft["windows_missed"] / (ttft["windows"] * 0.01), abs=1e-6)
    assert ttft["met"] is False  # 12 of 72 windows is far beyond 1%
    assert [i["id"] for i in ttft["incidents"]] == [hit.pk]
    assert ttft["incidents"][0]["charged"] == ttft["windows_missed"]

    availability = rows[(MODEL, "availability")]
    requests, failed = (
        666 * 60 + 660 * 300,
        6 * 60,
    )  # per minute: 600 stop + 60 abort (+ 6 error in the bad hour)
    assert availability["requests"] == pytest.approx(requests, rel=0.03)
    assert availability["failed"] == pytest.approx(failed, rel=0.05)  # aborts are not failures
    assert availability["budget_burned"] == pytest.approx(
        availability["failed"] / (availability["requests"] * 0.001),
        rel=5e-3,  # both rounded
    )
    assert [i["id"] for i in availability["incidents"]] == [hit.pk]
    assert (MODEL, "tpot_p99") not in rows  # no TPOT histogram was exported
