#!/usr/bin/env python3
"""Correlation end to end: webhook -> ingestion worker -> correlation worker -> PostgreSQL.

For every alert, the time from the 202 of the delivery that carried it to the moment its row has
`incident_id` set, under an Alertmanager storm against a production-like Rootline (`bin/serve`, as
`make serve` runs it), on a fresh PostgreSQL database and a flushed Redis database of its own.

    .venv/bin/python bench/correlate/end_to_end.py  # storm (5,000/s, 25 s) + steady (500/s, 25 s)
    .venv/bin/python bench/correlate/end_to_end.py --case storm --rate 5000 --seconds 25
    .venv/bin/python bench/correlate/end_to_end.py --case steady --rate 500 --seconds 25
    .venv/bin/python bench/correlate/end_to_end.py --case storm --profile  # + py-spy of both workers

Each case, all on 127.0.0.1 and bounded in count (rate x seconds alerts) and time (--seconds of
sending, --drain-timeout of waiting), every process it starts stopped on exit:
1. `DROP DATABASE rootline_bench_e2e WITH (FORCE)`, `CREATE`, `migrate`; Redis db 7 flushed
   (broker and cache of this run only).
2. `bin/serve` in its own session (process group): gunicorn gthread, the ingestion worker, the
   correlation worker (1 process, nice 10), beat; `DATABASE_URL` and `CELERY_BROKER_URL` set.
3. `manage.py integration add` (Alertmanager) and `manage.py api_token`.
4. The storm: --clusters clusters (20) of an LLM serving fleet (vLLM deployments, 4 pods each, GPU
   nodes), cascades as Alertmanager groups them (`group_by: [alertname, cluster, namespace]`): one
   body per alertname and cluster, up to --body alerts (100), e.g. KV fragmentation on 100 pods,
   then KV pool exhaustion on the same pods, then OOM kills, crash loops, queueing on siblings,
   TTFT per model; or Xid -> engine crash -> target down; preemption -> ITL -> TPOT; hot replica
   -> queueing -> TTFT; plus unrelated noise. Every alert is a new occurrence (startsAt of its
   wave). The bodies are built before the clock starts, then --senders threads (8) send them
   open loop on a schedule of --rate alerts/s (a sender that falls behind sends at once: the
   achieved rate is then the highest the machine sustains, and is reported).
5. Meanwhile a poller reads PostgreSQL directly (psycopg) every --interval s (0.075; while a backlog
   makes polls slow, less often: its queries take at most --poll-share of the time, 0.05): per open
   delivery, how many of its alerts are stored, correlated, and in an incident. An alert's
   latency is (poll time - 202 time of its delivery); poll error <= one interval.
   `cpu_s`: CPU seconds per kind of process from the first request until every alert is in
   its incident (bench/ingest/cpu.py; `load_client` is this script: senders and poller).
6. Stop `bin/serve` and its group; print one JSON line per case; --out appends them to a file.

Latency is split into: 202 -> stored (ingestion: drain task, parse, upsert) and 202 -> in an
incident (stored + correlation: debounce flag, queue, advisory lock wait, window load, engine,
writes). `correlate_key` run times are read from the correlation worker's log.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "ingest"))

import cpu  # noqa: E402  (bench/ingest/cpu.py: CPU seconds per kind of process)

sys.path.insert(0, str(ROOT / "bench"))
import calibrate  # noqa: E402  (bench/calibrate.py: how fast the machine runs plain Python now)

from correlate.simulator.core import am_fingerprint, k8s_suffix  # noqa: E402

sys.path.insert(0, str(ROOT / "bench" / "correlate"))
from e2e_harness import (  # noqa: E402  (bench/correlate/e2e_harness.py: processes, senders, poller)
    Deliveries,
    freeport,
    group_pids,
    pct,
    poller,
    psql,
    sender,
    stop_group,
    summary,
    task_times,
    wait_http,
)

PG = "postgres://postgres@127.0.0.1:5432"
LOOPBACK = ("127.0.0.1", "localhost", "::1")

# Cascades as fleets see them; (alertname, target kind, seconds after the wave's first alert).
STORIES = {
    "fragmentation": [
        ("LLMKVFragmentationHigh", "pod", 0),
        ("LLMKVCachePoolUtilizationHigh", "pod", 4),
        ("LLMContainerOOMKilled", "pod", 8),
        ("KubePodCrashLooping", "pod", 10),
        ("LLMQueueWaitHigh", "sibling", 12),
        ("LLMTTFTp99High", "model", 14),
    ],
    "xid": [("DCGMXidErrors", "gpu", 0), ("LLMEngineContainerCrashLoop", "pod", 3), ("TargetDown", "pod", 5)],
    "preemption": [
        ("LLMVllmPreemptionsHigh", "pod", 0),
        ("LLMInterTokenLatencyJitter", "model", 4),
        ("LLMTPOTp99High", "model", 6),
    ],
    "hot": [
        ("LLMHotReplicaTokens", "pod", 0),
        ("LLMQueueWaitHigh", "pod", 3),
        ("LLMTTFTp99High", "model", 8),
    ],
}
NOISE = [
    "HostDiskWillFillIn4Hours",
    "KubeJobFailed",
    "NodeClockSkewDetected",
    "CertificateExpiringSoon",
    "LLMGateway5xxRate",
    "KubePodNotReady",
    "KubeContainerWaiting",
]
SEVERITY = {
    "LLMContainerOOMKilled": "critical",
    "DCGMXidErrors": "critical",
    "LLMTTFTp99High": "critical",
    "TargetDown": "critical",
    "LLMEngineContainerCrashLoop": "critical",
    "KubePodCrashLooping": "warning",
}
MODELS = [
    "llama-3.1-8b-instruct",
    "llama-3.1-70b-instruct",
    "qwen2.5-72b-instruct",
    "mixtral-8x7b-instruct",
    "mistral-7b-instruct",
    "deepseek-coder-33b",
    "gemma-2-27b-it",
    "phi-3-medium-128k",
]


def iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def fleet(rng: random.Random, clusters: int, deployments: int, pods_per: int) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for c in range(clusters):
        cluster = f"gpu-{['eu', 'us', 'ap'][c % 3]}-{c:02d}"
        pods = []
        for d in range(deployments):
            model = f"{MODELS[d % len(MODELS)]}-{d // len(MODELS)}"
            deployment = f"vllm-{model}"
            template = k8s_suffix(rng, 10)
            for p in range(pods_per):
                pods.append(
                    {
                        "cluster": cluster,
                        "namespace": "llm-serving",
                        "deployment": deployment,
                        "model": model,
                        "pod": f"{deployment}-{template}-{k8s_suffix(rng, 5)}",
                        "node": f"gpu-node-{c:02d}-{d:03d}-{p // 4}",
                        "gpu": str(p % 4),
                    }
                )
        out[cluster] = pods
    return out


def labels_for(name: str, kind: str, pod: dict, sibling: dict) -> dict[str, str]:
    base = {
        "alertname": name,
        "cluster": pod["cluster"],
        "namespace": pod["namespace"],
        "severity": SEVERITY.get(name, "warning"),
        "prometheus": "monitoring/k8s",
    }
    if kind == "pod":
        return {
            **base,
            "pod": pod["pod"],
            "container": "vllm",
            "model_name": pod["model"],
            "job": "vllm",
            "instance": f"{pod['pod']}:8000",
            "node": pod["node"],
        }
    if kind == "sibling":
        return {
            **base,
            "pod": sibling["pod"],
            "container": "vllm",
            "model_name": sibling["model"],
            "job": "vllm",
            "instance": f"{sibling['pod']}:8000",
            "node": sibling["node"],
        }
    if kind == "gpu":
        return {
            **base,
            "pod": "dcgm-exporter-k2x4p",
            "exported_pod": pod["pod"],
            "exported_namespace": pod["namespace"],
            "Hostname": pod["node"],
            "gpu": pod["gpu"],
            "job": "dcgm-exporter",
        }
    if kind == "node":
        return {**base, "node": pod["node"], "instance": f"{pod['node']}:9100", "job": "node-exporter"}
    return {**base, "model_name": pod["model"], "job": "llm-gateway", "service": "llm-gateway"}


def am_alert(labels: dict[str, str], starts: datetime) -> dict:
    name = labels["alertname"]
    where = labels.get("pod") or labels.get("model_name") or labels.get("node") or labels["cluster"]
    return {
        "status": "firing",
        "labels": labels,
        "annotations": {
            "summary": f"{name} on {where}",
            "description": (
                f"{name} has been firing for {where} in {labels['cluster']} for more than 2 minutes."
            ),
            "runbook_url": f"https://runbooks.example.com/llm/{name.lower()}",
        },
        "startsAt": iso(starts),
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": f"http://prometheus.monitoring:9090/graph?g0.expr={name}&g0.tab=1",
        "fingerprint": am_fingerprint(labels),
    }


def am_body(alerts: list[dict], cluster: str, name: str) -> dict:
    common = {k: v for k, v in alerts[0]["labels"].items() if all(a["labels"].get(k) == v for a in alerts)}
    return {
        "receiver": "rootline",
        "status": "firing",
        "alerts": alerts,
        "groupLabels": {"alertname": name, "cluster": cluster, "namespace": "llm-serving"},
        "commonLabels": common,
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.monitoring:9093",
        "version": "4",
        "truncatedAlerts": 0,
        "groupKey": f'{{}}:{{alertname="{name}", cluster="{cluster}", namespace="llm-serving"}}',
    }


def build_storm(
    *, rate: float, seconds: float, clusters: int, body: int, seed: int, t0: float, noise_share: float = 0.15
) -> list[tuple[float, int, bytes]]:
    """(send offset s, alerts, body bytes), ordered by send offset. Per cluster, waves of cascades
    over `body` pods at a time (one body per step, as Alertmanager groups them), waves
    overlapping; startsAt = the step's send time minus a 30 s group_wait."""
    rng = random.Random(seed)
    pods_per = 4
    deployments = max(25, (2 * body) // pods_per)
    fl = fleet(rng, clusters, deployments, pods_per)
    total = int(rate * seconds)
    per_cluster = total / clusters
    events: list[tuple[float, dict]] = []  # (send offset, body)
    for cluster, pods in fl.items():
        made = 0
        t = rng.uniform(0, 1.0)
        while made < per_cluster:
            if rng.random() < noise_share:
                name = rng.choice(NOISE)
                chosen = rng.sample(pods, min(len(pods), rng.randint(body // 2, body)))
                starts = datetime.fromtimestamp(t0 + t - 30, UTC)
                alerts = [
                    am_alert(
                        labels_for(name, "node" if name.startswith(("Host", "Node")) else "pod", p, p), starts
                    )
                    for p in chosen
                ]
                alerts = list({a["fingerprint"]: a for a in alerts}.values())
                events.append((t, am_body(alerts, cluster, name)))
                made += len(alerts)
            else:
                story = rng.choice(list(STORIES))
                chosen = rng.sample(pods, min(len(pods), body))
                for name, kind, lag in STORIES[story]:
                    at = t + lag * rng.uniform(0.8, 1.2) * min(1.0, seconds / 40)
                    starts = datetime.fromtimestamp(t0 + at - 30, UTC)
                    alerts = []
                    for p in chosen:
                        sib = pods[(pods.index(p) ^ 1)]
                        alerts.append(am_alert(labels_for(name, kind, p, sib), starts))
                    alerts = list(
                        {a["fingerprint"]: a for a in alerts}.values()
                    )  # model-level: one per model
                    events.append((at, am_body(alerts, cluster, name)))
                    made += len(alerts)
            t += rng.expovariate(1.0) * (body / (rate / clusters)) * 0.9
    events.sort(key=lambda e: e[0])
    # Re-time on the rate (send offset = alerts before it / rate), keeping the order and startsAt.
    out, sent, seen = [], 0, set()
    for _, b in events:
        if sent >= total:
            break
        for a in b["alerts"]:  # every alert a new occurrence: a repeated (fingerprint, startsAt) moves 1 ms
            while (a["fingerprint"], a["startsAt"]) in seen:
                moved = datetime.strptime(a["startsAt"], "%Y-%m-%dT%H:%M:%S.%fZ") + timedelta(milliseconds=1)
                a["startsAt"] = iso(moved)
            seen.add((a["fingerprint"], a["startsAt"]))
        n = len(b["alerts"])
        out.append((sent / rate, n, json.dumps(b).encode()))
        sent += n
    return out


def run_case(args, case: str, rate: float, seconds: float, work: Path) -> dict:
    db, redis_db = args.db, args.redis_db
    machine_before = (
        calibrate.loop_seconds()
    )  # the machine's speed now: figures of two runs compare only at the same
    print(f"[{case}] fresh database {db}, Redis db {redis_db}", file=sys.stderr)
    psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    psql(f"CREATE DATABASE {db}")
    subprocess.run(
        ["redis-cli", "-h", "127.0.0.1", "-n", str(redis_db), "FLUSHDB"], check=True, capture_output=True
    )
    env = dict(
        os.environ,
        DATABASE_URL=f"{PG}/{db}",
        CELERY_BROKER_URL=f"redis://127.0.0.1:6379/{redis_db}",
        ROOTLINE_DATA_DIR=str(work / "data"),
        ROOTLINE_LOG_LEVEL="WARNING",
    )
    for name in ("WEB_WORKERS", "WEB_THREADS", "WORKER_CONCURRENCY"):
        env.setdefault(name, {"WEB_WORKERS": "2", "WEB_THREADS": "4", "WORKER_CONCURRENCY": "2"}[name])
    (work / "data").mkdir(parents=True, exist_ok=True)
    py = str(ROOT / ".venv/bin/python")
    subprocess.run(
        [py, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True
    )
    integration = json.loads(
        subprocess.run(
            [
                py,
                "manage.py",
                "integration",
                "add",
                "--kind",
                "alertmanager",
                "--name",
                "e2e",
                "--token",
                "T",
            ],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    port = args.port or freeport()
    base = f"http://127.0.0.1:{port}"
    log = work / f"serve.{case}.log"
    t_build = time.time()
    bodies = build_storm(
        rate=rate, seconds=seconds, clusters=args.clusters, body=args.body, seed=args.seed, t0=t_build + 20
    )
    build_s = time.time() - t_build
    n_alerts = sum(n for _, n, _ in bodies)
    print(f"[{case}] {len(bodies)} bodies, {n_alerts} alerts, built in {build_s:.1f} s", file=sys.stderr)
    serve = subprocess.Popen(
        ["bash", "bin/serve"],
        cwd=ROOT,
        env=dict(env, PORT=str(port), BIN=str(ROOT / ".venv/bin")),
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    profilers: list[subprocess.Popen] = []
    try:
        if not wait_http(f"{base}/healthz", 60):
            raise SystemExit(f"rootline not up; see {log}")
        time.sleep(3)  # workers connect to the broker
        if args.profile:
            for pattern, tag in (
                ("correlation-", "correlation"),
                ("ingest@", "ingest"),
                ("gunicorn", "gunicorn"),
            ):
                for pid in group_pids(serve.pid, pattern):
                    profilers.append(
                        subprocess.Popen(
                            [
                                str(ROOT / ".venv/bin/py-spy"),
                                "record",
                                "--nonblocking",
                                "--subprocesses",
                                "-r",
                                "50",
                                "-f",
                                "raw",
                                "-d",
                                str(int(seconds + args.drain_timeout)),
                                "-o",
                                str(work / f"profile.{case}.{tag}.{pid}.txt"),
                                "-p",
                                str(pid),
                            ],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
        cpu.APP_PGID = serve.pid  # bin/serve's session: only its gunicorn and workers count as the app
        cpu_before = cpu.snap()
        url = f"{base}{integration['url']}"
        out = Deliveries()
        done = threading.Event()
        result: dict = {}
        start_at = time.time() + 0.5
        deadline_box = [start_at + seconds + 5 + args.drain_timeout]
        poll = threading.Thread(
            target=poller,
            args=(env["DATABASE_URL"], out, args.interval, done, deadline_box, result, args.poll_share),
            daemon=True,
        )
        poll.start()
        next_index = [0, threading.Lock()]
        stop_at = start_at + seconds * 1.5 + 5  # a sender far behind stops here (bounded in time)
        threads = [
            threading.Thread(
                target=sender, args=(bodies, start_at, url, "T", out, next_index, stop_at), daemon=True
            )
            for _ in range(args.senders)
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        send_end = time.time()
        done.set()
        poll.join()
        cpu_used = cpu.diff(cpu_before, cpu.snap())
        for p in profilers:
            p.send_signal(signal.SIGINT)
        for p in profilers:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        counts = json.loads(
            psql(
                "SELECT json_build_object('alerts',(SELECT count(*) FROM incidents_alert),"
                "'in_incident',(SELECT count(*) FROM incidents_alert WHERE incident_id IS NOT NULL),"
                "'not_correlated',(SELECT count(*) FROM incidents_alert WHERE NOT correlated),"
                "'incidents',(SELECT count(*) FROM incidents_incident),"
                "'deliveries_not_processed',"
                "(SELECT count(*) FROM incidents_delivery WHERE status <> 'processed'))",
                db,
            )
        )
    finally:
        for p in profilers:
            if p.poll() is None:
                p.kill()
        stop_group(serve)
    accepted = sum(n for _, n in out.items.values())
    first_202 = min((t for t, _ in out.items.values()), default=start_at)
    sent_wall = out.last_202 - start_at
    lat = result["lat"]
    lat_req = sorted(out.lat)
    return {
        "case": case,
        "target_rate": rate,
        "target_seconds": seconds,
        "clusters": args.clusters,
        "body": args.body,
        "senders": args.senders,
        "bodies": len(out.items),
        "alerts_accepted": accepted,
        "alerts_planned": n_alerts,
        "send_wall_s": round(sent_wall, 2),
        "accepted_alerts_per_s": round(accepted / sent_wall, 1) if sent_wall > 0 else None,
        "status": out.status,
        "errors": out.errors[:5],
        "request_ms": {"p50": round(pct(lat_req, 0.5) * 1000, 1), "p99": round(pct(lat_req, 0.99) * 1000, 1)}
        if lat_req
        else None,
        "to_stored": summary(lat["stored"]),
        "to_correlated": summary(lat["correlated"]),
        "to_incident": summary(lat["incident"]),
        "drain_after_last_202_s": round(result["last_incident_at"] - out.last_202, 2)
        if result.get("last_incident_at")
        else None,
        "first_202_to_last_incident_s": round(result["last_incident_at"] - first_202, 2)
        if result.get("last_incident_at")
        else None,
        "poll_interval_s": args.interval,
        "poll_share": args.poll_share,
        "polls": result["polls"],
        "mean_poll_ms": result["mean_poll_ms"],
        "mean_poll_interval_ms": result["mean_poll_interval_ms"],
        "widest_poll_gap_ms": result["widest_poll_gap_ms"],
        "open_deliveries_at_end": result["open_at_end"],
        "db": counts,
        "tasks": task_times(log),
        "cpu_s": cpu_used,
        "send_ended_at": round(send_end, 3),
        "log": str(log),
        "python_loop_10m_s": {
            "before": round(machine_before, 3),
            "after": round(calibrate.loop_seconds(), 3),
        },  # bench/calibrate.py's loop
        # This machine's PostgreSQL runs without it (its CI configuration): the tables are never analysed.
        "postgres_autovacuum": psql("SHOW autovacuum"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", choices=["storm", "steady", "both"], default="both")
    ap.add_argument("--rate", type=float, default=None, help="alerts/s (storm 5000, steady 500)")
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--body", type=int, default=100, help="alerts per body (at most)")
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--interval", type=float, default=0.075, help="database poll interval, s")
    ap.add_argument(
        "--poll-share",
        type=float,
        default=0.05,
        help="most of the time the poller's queries may take "
        "(0.5 until 2026-11-29 23:40, 0.1 until 2026-11-30 08:40: "
        "its queries took 4-7 s of PostgreSQL's CPU in a 5,000/s storm; "
        "coarser polls only ever lengthen the latencies measured)",
    )
    ap.add_argument("--drain-timeout", type=float, default=240)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--db", default="rootline_bench_e2e")
    ap.add_argument("--redis-db", type=int, default=7)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument(
        "--profile", action="store_true", help="py-spy the workers and gunicorn (raw stacks in --work)"
    )
    ap.add_argument("--work", default="")
    ap.add_argument("--out", default="", help="append the JSON lines here too")
    args = ap.parse_args()
    if not args.db.startswith("rootline_bench"):
        sys.exit("refusing a database not named rootline_bench*: it is dropped first")
    work = Path(args.work or f"/tmp/rl_e2e.{int(time.time())}")
    work.mkdir(parents=True, exist_ok=True)
    print(f"work dir: {work}", file=sys.stderr)
    cases = (
        [("storm", args.rate or 5000), ("steady", 500)]
        if args.case == "both"
        else [(args.case, args.rate or (5000 if args.case == "storm" else 500))]
    )
    for case, rate in cases:
        line = json.dumps(run_case(args, case, rate, args.seconds, work))
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
