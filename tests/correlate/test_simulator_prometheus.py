"""End to end with the real thing: backfill a scenario's metrics.om with promtool, start
Prometheus on it, and evaluate every modelled alert's own PromQL (from its generatorURL) at the
start of its `for` window and at its startsAt: the alert's series must be in the answer."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from correlate.simulator import scenario_names
from correlate.simulator.core import NS, parse_start
from correlate.simulator.rules import KINDS
from correlate.simulator.scenarios import build

START = "2026-03-14T00:00:00Z"
SEED = int(os.environ.get("SIMULATOR_SEED", "1"))
RULE_ONLY_LABELS = {
    "alertname",
    "severity",
    "layer",
    "failure_mode",
    "team",
    "prometheus",
    "region",
    "err_code",
    "err_msg",
}

pytestmark = pytest.mark.services


def _binary(env: str, name: str) -> str | None:
    path = os.environ.get(env) or shutil.which(name) or f"/usr/bin/{name}"
    return path if os.path.exists(path) else None


@pytest.fixture(scope="module")
def binaries() -> tuple[str, str]:
    prometheus, promtool = _binary("PROMETHEUS_BIN", "prometheus"), _binary("PROMTOOL_BIN", "promtool")
    if not (prometheus and promtool):
        if os.environ.get("REQUIRE_SERVICES") == "1":
            pytest.fail("prometheus / promtool not found")
        pytest.skip("prometheus / promtool not installed")
    return prometheus, promtool


def _query(port: int, expr: str, at: float) -> list[dict]:
    q = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{q}", timeout=10) as resp:
        answer = json.load(resp)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


@pytest.mark.parametrize("name", scenario_names())
def test_alert_expressions_hold_on_the_backfilled_series(binaries, tmp_path: Path, name: str) -> None:
    prometheus, promtool = binaries
    story = build(name, parse_start(START), SEED)
    (tmp_path / "metrics.om").write_text(story.build()["metrics.om"])
    subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(tmp_path / "metrics.om"),
            str(tmp_path / "data"),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (tmp_path / "prometheus.yml").write_text("global: {}\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            prometheus,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=10y",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1)
                break
            except OSError:
                assert time.monotonic() < deadline, "prometheus did not become ready"
                time.sleep(0.2)
        checked = 0
        for occ in story.occs:
            if occ.key not in story.first_seen or (occ.dep is None and occ.kind != "disk"):
                continue  # blackbox, job and node-exporter rules whose series the story does not model
            expr = urllib.parse.parse_qs(urllib.parse.urlparse(occ.generator_url).query)["g0.expr"][0]
            kind = KINDS[occ.kind]
            rule = (
                kind.slow if kind.slow is not None and expr.startswith(kind.slow.promql[:20]) else kind.fast
            )
            want = {k: v for k, v in occ.labels.items() if k not in RULE_ONLY_LABELS}
            for at in (occ.starts / NS - max(0, rule.for_s - 60), occ.starts / NS):
                result = _query(port, expr, at)
                assert any(all(r["metric"].get(k, v) == v for k, v in want.items()) for r in result), (
                    name,
                    occ.labels["alertname"],
                    occ.starts_at,
                    at,
                    expr,
                )
            checked += 1
        assert checked >= 2
    finally:
        proc.terminate()
        proc.wait(timeout=30)
