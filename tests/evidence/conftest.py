"""The story (2 hours, 4 pods, pod-2 fragments then OOMs at T+60m) as OpenMetrics, a real
Prometheus backfilled with it by promtool, and an incident whose alerts tell the same story."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from tests.conftest import free_port, require_binary, stop_process, wait_until
from tests.evidence import story_openmetrics

# 01:00 UTC two days ago: whole hours keep the windows' steps aligned as with any fixed start, and
# a start in the past whatever the machine's clock keeps the story inside "never beyond now"
# (a fixed date would be ahead of an earlier clock). 10y retention keeps Prometheus from deleting it.
STORY_START = (datetime.now(UTC) - timedelta(days=2)).replace(hour=1, minute=0, second=0, microsecond=0)
NAMESPACE = "llm-serving"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def at(minutes: float) -> datetime:
    return STORY_START + timedelta(minutes=minutes)


@pytest.fixture(scope="session")
def story_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("story")
    story_openmetrics.main(
        [
            "--start",
            str(STORY_START.timestamp()),
            "--out",
            str(folder / "story.om"),
            "--story-json",
            str(folder / "story.json"),
        ]
    )
    return folder / "story.om"


@pytest.fixture(scope="session")
def backfilled_prometheus(story_file, tmp_path_factory):
    """Debian's prometheus on a free loopback port, on blocks promtool made from the story."""
    yield from prometheus_backfilled_with(story_file, tmp_path_factory.mktemp("tsdb"))


def prometheus_backfilled_with(openmetrics: Path, folder: Path):
    """Yields the URL of a Prometheus serving `openmetrics`, backfilled by promtool into `folder`."""
    prometheus, promtool = require_binary("prometheus"), require_binary("promtool")
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(folder / "data")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (folder / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")
    port = free_port()
    log = open(folder / "prometheus.log", "wb")
    process = subprocess.Popen(
        [
            prometheus,
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            "--storage.tsdb.retention.time=10y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(url), timeout=30, what="prometheus /-/ready")
        yield url
    finally:
        stop_process(process)
        log.close()


def _ready(url: str) -> bool:
    try:
        return requests.get(f"{url}/-/ready", timeout=1).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture
def story_incident(make_integration):
    """The cascade as stored rows: fragmentation alert on pod-2, its OOM and restart, queueing on
    the siblings and the model's TTFT breach; everything resolved by T+85m."""
    from incidents.models import Alert, Incident

    integration = make_integration()

    def make():
        incident = Incident.objects.create(
            title="story",
            started_at=at(45),
            last_alert_at=at(65),
            resolved_at=at(85),
            status="resolved",
            failure_modes=["kv_fragmentation", "oom", "restart", "queueing", "slo_ttft"],
            scope={"namespace": NAMESPACE},
        )
        fleet = {"namespace": NAMESPACE, "model_name": MODEL}
        rows = [
            ("KVCacheFragmentationHigh", 45, {"pod": "pod-2", **fleet}, "kv_fragmentation"),
            ("LLMContainerOOMKilled", 60, {"pod": "pod-2", "container": "vllm", **fleet}, "oom"),
            ("KubePodCrashLooping", 61, {"pod": "pod-2", "container": "vllm", **fleet}, "restart"),
            *[
                ("VLLMRequestQueueHigh", 63, {"pod": pod, **fleet}, "queueing")
                for pod in ("pod-0", "pod-1", "pod-3")
            ],
            ("LLMTTFTP99High", 65, fleet, "slo_ttft"),
        ]
        for number, (name, minute, labels, mode) in enumerate(rows):
            Alert.objects.create(
                fingerprint=f"{incident.pk}-{number}",
                starts_at=at(minute),
                ends_at=at(85),
                status="resolved",
                alertname=name,
                labels={"alertname": name, **labels},
                integration=integration,
                received_at=at(minute),
                incident=incident,
                failure_mode=mode,
            )
        return incident

    return make


def write_openmetrics(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join([*lines, "# EOF"]) + "\n")
    return path


def story_events(story_file: Path) -> dict:
    return json.loads(story_file.with_name("story.json").read_text())
