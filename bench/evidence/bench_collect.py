"""Evidence collection against a local Prometheus: an incident whose plan yields 50 series over
2 hours at 15 s (alerts from T+60m to T+105m: the window is T..T+120m, 481 steps), collected by a
separate worker-like process; wall time and peak RSS.

    .venv/bin/python bench/evidence/bench_collect.py [--pods 8] [--runs 5] [--keep]

Steps: the testbed story (tests/evidence/story_openmetrics.py) with --pods pods -> promtool
backfill -> Debian's prometheus on a free loopback port (retention 10y) -> a fresh database
(SQLite file in the work dir, or DATABASE_URL's server with a throwaway database name) with one
incident whose alerts name every pod -> `python bench/evidence/bench_collect.py --worker`, a
process that imports the Celery app as a worker does and calls the `incidents.collect_evidence`
task function --runs times (the first run creates the rows, later ones upsert), then once more
from the local store (`import_metrics` of the same file, PROMETHEUS_URL unset).
Everything started is stopped by PID at the end. One JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START = 1763600400.0  # 2025-11-20T01:00:00Z, a fixed past story


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(url: str, seconds: float) -> None:
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"prometheus at {url} not ready after {seconds}s")


def orchestrate(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="rl_evidence_bench."))
    prometheus = os.environ.get("PROMETHEUS_BIN") or shutil.which("prometheus") or "/usr/bin/prometheus"
    promtool = os.environ.get("PROMTOOL_BIN") or shutil.which("promtool") or "/usr/bin/promtool"
    timings: dict[str, float] = {}
    t = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests/evidence/story_openmetrics.py"),
            "--start",
            str(START),
            "--pods",
            str(args.pods),
            "--out",
            str(work / "story.om"),
        ],
        check=True,
        capture_output=True,
    )
    timings["generate_s"] = time.monotonic() - t
    t = time.monotonic()
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(work / "story.om"), str(work / "data")],
        check=True,
        capture_output=True,
    )
    timings["promtool_s"] = time.monotonic() - t
    (work / "prometheus.yml").write_text("global: {}\nscrape_configs: []\n")
    port = free_port()
    log = open(work / "prometheus.log", "wb")
    server = subprocess.Popen(
        [
            prometheus,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            "--storage.tsdb.retention.time=10y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    database = os.environ.get("DATABASE_URL", "")
    throwaway = ""
    try:
        wait_ready(url, 30)
        env = {
            **os.environ,
            "ROOTLINE_SECRET_KEY": "bench",
            "ROOTLINE_DATA_DIR": str(work),
            "PYTHONPATH": str(ROOT),
        }
        env.pop("CELERY_BROKER_URL", None)
        if database.startswith("postgres"):
            throwaway = f"rootline_evbench_{os.getpid()}"
            base = database.rsplit("/", 1)[0]
            admin(base, f"CREATE DATABASE {throwaway}")
            env["DATABASE_URL"] = f"{base}/{throwaway}"
        else:
            env["DATABASE_URL"] = f"sqlite:///{work / 'bench.sqlite3'}"
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0", "--skip-checks"], cwd=ROOT, env=env, check=True
        )
        worker = subprocess.run(
            [
                sys.executable,
                str(Path(__file__)),
                "--worker",
                "--pods",
                str(args.pods),
                "--runs",
                str(args.runs),
                "--url",
                url,
                "--om",
                str(work / "story.om"),
            ],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        result = json.loads(worker.stdout.strip().splitlines()[-1])
        result.update({k: round(v, 3) for k, v in timings.items()})
        result["database"] = "postgresql" if throwaway else "sqlite"
        print(json.dumps(result))
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        if throwaway:
            admin(database.rsplit("/", 1)[0], f"DROP DATABASE IF EXISTS {throwaway}")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def admin(server: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(sql)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def current_rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def work_as_worker(args: argparse.Namespace) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")
    import django

    django.setup()
    from datetime import datetime, timedelta

    from django.conf import settings
    from django.core.management import call_command

    import rootline.celery  # noqa: F401 - a worker has the Celery app loaded
    from incidents import services
    from incidents.models import Alert, EvidenceSeries, Incident
    from incidents.tasks import collect_evidence

    baseline = current_rss_mb()
    t0 = datetime.fromtimestamp(START, UTC)
    integration, _ = services.integration_add(
        kind="alertmanager", name="bench", token="bench-token", rate_limit=None
    )
    incident = Incident.objects.create(
        title="bench",
        started_at=t0 + timedelta(minutes=60),
        status="resolved",
        resolved_at=t0 + timedelta(minutes=105),
        failure_modes=["kv_fragmentation", "oom"],
    )
    for number in range(args.pods):
        labels = {
            "alertname": "KVCacheFragmentationHigh",
            "namespace": "llm-serving",
            "pod": f"pod-{number}",
            "model_name": "meta-llama/Llama-3.1-8B-Instruct",
        }
        Alert.objects.create(
            fingerprint=f"bench-{number}",
            starts_at=t0 + timedelta(minutes=60),
            status="resolved",
            ends_at=t0 + timedelta(minutes=105),
            alertname=labels["alertname"],
            labels=labels,
            integration=integration,
            received_at=t0,
            incident=incident,
            failure_mode="kv_fragmentation",
        )
    settings.PROMETHEUS_URL = args.url
    runs = []
    for _ in range(args.runs):
        started = time.perf_counter()
        collect_evidence(incident.pk)
        runs.append(time.perf_counter() - started)
    rows = EvidenceSeries.objects.filter(incident=incident)
    series, points = rows.count(), sum(rows.values_list("point_count", flat=True))
    sources = sorted(set(rows.values_list("source", flat=True)))
    peak_prometheus = rss_mb()

    started = time.perf_counter()
    call_command("import_metrics", args.om, stdout=open(os.devnull, "w"))
    import_s = time.perf_counter() - started
    settings.PROMETHEUS_URL = None
    local = Incident.objects.create(
        title="bench local",
        started_at=incident.started_at,
        status="resolved",
        resolved_at=incident.resolved_at,
        failure_modes=incident.failure_modes,
    )
    Alert.objects.filter(incident=incident).update(incident=local)
    started = time.perf_counter()
    collect_evidence(local.pk)
    local_s = time.perf_counter() - started
    print(
        json.dumps(
            {
                "pods": args.pods,
                "series": series,
                "points": points,
                "sources": sources,
                "collect_prometheus_s": [round(r, 3) for r in runs],
                "rss_after_setup_mb": round(baseline, 1),
                "peak_rss_prometheus_mb": round(peak_prometheus, 1),
                "import_metrics_s": round(import_s, 3),
                "collect_local_s": round(local_s, 3),
                "local_series": EvidenceSeries.objects.filter(incident=local).count(),
                "peak_rss_mb": round(rss_mb(), 1),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--om", help=argparse.SUPPRESS)
    args = parser.parse_args()
    (work_as_worker if args.worker else orchestrate)(args)


if __name__ == "__main__":
    main()
