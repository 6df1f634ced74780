"""The quick fault drills' fixtures: each drill gets a PostgreSQL cluster and a Redis of its own
(tests/support/drills.py), so stopping them disturbs no other test, and Rootline's processes
against them, all stopped at the end."""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import missing, require_binary
from tests.evidence import story_openmetrics
from tests.evidence.conftest import MODEL, NAMESPACE, STORY_START, at
from tests.support import drill_traffic, drills

# The sweeps that requeue what a crash or an outage left behind, sped up so a drill ends in
# seconds: the defaults (60 s, 120 s) would make each wait minutes for the same behaviour.
FAST_SWEEPS = {"ROOTLINE_SWEEP_SECONDS": "3", "ROOTLINE_REQUEUE_AFTER_SECONDS": "8"}
TOKEN = "drill-token"


@pytest.fixture
def private_postgres() -> Iterator[drills.PrivatePostgres]:
    lack = drills.what_is_missing()
    if lack:
        missing(lack)
    cluster = drills.PrivatePostgres().init()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def private_redis() -> Iterator[drills.PrivateRedis]:
    lack = drills.what_is_missing()
    if lack:
        missing(lack)
    redis = drills.PrivateRedis()
    redis.start()
    try:
        yield redis
    finally:
        redis.destroy()


@pytest.fixture
def make_stack(private_postgres, private_redis, tmp_path: Path):
    """make_stack(**env) -> a migrated Stack (no process started yet) with an Alertmanager
    integration whose token is TOKEN (`stack.hook`)."""
    stacks: list[drills.Stack] = []

    def make(**extra_env: str) -> drills.Stack:
        url = private_postgres.create_database("rootline_drill")
        stack = drills.Stack(
            url, private_redis.url(0), tmp_path / "stack", extra_env={**FAST_SWEEPS, **extra_env}
        )
        stacks.append(stack)
        stack.migrate()
        stack.hook = stack.integration(token=TOKEN)["url"]
        return stack

    yield make
    for stack in stacks:
        stack.stop()


@pytest.fixture
def ledger_of():
    return lambda stack: drill_traffic.Ledger(stack.database_url)


@pytest.fixture
def run_id() -> str:
    """Makes this drill's alerts new occurrences (its own model and pod names)."""
    return uuid.uuid4().hex[:8]


# What a failing drill's message keeps of a log: CI shows the start and the end of a failure's
# output, so each process gets its notable lines (a broker lost, a task failed) and its last few,
# workers first, rather than a long tail of the web process's tracebacks.
NOTABLE = re.compile(r"WARNING|ERROR|CRITICAL|Connected to|Traceback")


def tails(stack: drills.Stack) -> str:
    lines = int(os.environ.get("DRILL_TAIL_LINES", "8"))
    ordered = sorted(stack.processes, key=lambda p: (p.name.startswith(("web", "beat")), p.name))
    return "\n".join(f"--- {p.name} ---\n{digest(p.tail(5000), lines)}" for p in ordered)


def digest(log: str, lines: int) -> str:
    """The log's notable lines (each distinct one once, the last `lines` of them), how many tasks
    it received since it last connected to the broker, and its last lines."""
    every = log.splitlines()
    notable = list(dict.fromkeys(line[:240] for line in every if NOTABLE.search(line)))
    connected = max((n for n, line in enumerate(every) if "Connected to" in line), default=0)
    received = sum(" received" in line for line in every[connected:])
    return "\n".join(
        ["  notable:", *notable[-lines:], f"  tasks received since it last connected: {received}", "  last:"]
        + [line[:240] for line in every[-lines:]]
    )


@pytest.fixture(scope="session")
def story_tsdb(tmp_path_factory) -> Path:
    """The evidence tests' story (tests/evidence: 2 hours, pod-2 fragments then OOMs), backfilled
    by promtool into a TSDB folder once."""
    promtool = require_binary("promtool")
    folder = tmp_path_factory.mktemp("drill-story")
    story_openmetrics.main(["--start", str(STORY_START.timestamp()), "--out", str(folder / "story.om")])
    subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(folder / "story.om"),
            str(folder / "data"),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return folder


@pytest.fixture
def story_prometheus(story_tsdb):
    """Debian's Prometheus holding the story (`.prometheus`, stoppable), behind a proxy that can
    be made slow (`.proxy`, what Rootline is pointed at)."""
    prometheus = drills.PrometheusProcess(require_binary("prometheus"), story_tsdb / "data", story_tsdb)
    prometheus.start()
    proxy = drills.SlowProxy(prometheus.url)
    try:
        yield SimpleNamespace(prometheus=prometheus, proxy=proxy)
    finally:
        proxy.close()
        prometheus.stop()


STORY_ALERTS = (
    ("KVCacheFragmentationHigh", 45, {"pod": "pod-2"}),
    ("LLMContainerOOMKilled", 60, {"pod": "pod-2", "container": "vllm"}),
    ("KubePodCrashLooping", 61, {"pod": "pod-2", "container": "vllm"}),
    *[("VLLMRequestQueueHigh", 63, {"pod": pod}) for pod in ("pod-0", "pod-1", "pod-3")],
    ("LLMTTFTP99High", 65, {}),
)


@pytest.fixture
def story_bodies() -> list[bytes]:
    """The story's alerts as Alertmanager sends them once they resolved (T+85m), one body a name."""
    alerts = [
        {
            "status": "resolved",
            "labels": {
                "alertname": name,
                "cluster": "gpu-story",
                "namespace": NAMESPACE,
                "model_name": MODEL,
                "severity": "critical" if name == "LLMContainerOOMKilled" else "warning",
                **labels,
            },
            "annotations": {"summary": f"{name} in the story"},
            "startsAt": drill_traffic.rfc3339(at(minute).timestamp()),
            "endsAt": drill_traffic.rfc3339(at(85).timestamp()),
        }
        for name, minute, labels in STORY_ALERTS
    ]
    return drill_traffic.grouped_bodies(alerts)
