#!/usr/bin/env python3
"""The load drills of ../shared/DOMAIN.md on Rootline's own ingest, end to end: `bin/serve` as
`make serve` runs it (gunicorn, the ingestion worker, the correlation shards, the evidence worker,
beat) against a PostgreSQL cluster and a Redis of its own (tests/support/drills.py), fed open loop
at a named rate by senders that retry a 5xx or a dropped connection as Alertmanager does.

    bench/drills/load.py --profile steady            # 500 alerts/s for 30 min
    bench/drills/load.py --profile ramp              # 500 -> 1,000/s in 2 min, 1,000/s for 30 min
    bench/drills/load.py --profile spike             # 500/s 1 min, 5,000/s for 5 min, 500/s 2 min
    bench/drills/load.py --profile mix               # 500/s, 10 min, 3:7 of 10,000- and 1-alert bodies
    bench/drills/load.py --profile knee              # 60 s at each of 250 ... 4,000/s: where it falls behind
    bench/drills/load.py --profile steady --scale 0.05   # the same shape, a twentieth as long

Prints one JSON line (and appends it to bench/results/drills.jsonl): pass (nothing lost: every
body accepted in the end and every alert stored, processed and correlated; nothing doubled: every
occurrence once, no cascade with two incidents), the accepted rate, p99 answer time, the backlog's
drain time after the last body, delivery -> incident p50/p99, the peak memory (VmHWM) of each kind
of process, and the CPU it all took. Bodies are alerts of cascades (docs/drills.md) over pods of
one deployment per cascade, every alert a new occurrence, `startsAt` 30 s before it is sent.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "correlate"))
sys.path.insert(0, str(ROOT / "bench"))

import calibrate  # noqa: E402  (bench/calibrate.py: how fast the machine runs plain Python now)
from e2e_harness import Deliveries, poller, stop_group, summary  # noqa: E402

from tests.support.drill_traffic import CASCADE, Ledger, rfc3339, webhook_body  # noqa: E402
from tests.support.drills import PrivatePostgres, PrivateRedis, Stack, free_port, wait_for  # noqa: E402

POD_NAMES = [(name, kind) for name, kind, _ in CASCADE if kind != "model"]  # every alert its own identity
CLUSTERS = 8
TOKEN = "load-token"


# The schedule: when each body is due ----------------------------------------------------------


def rate_at(profile: str, t: float, scale: float) -> float:
    """Alerts per second `t` seconds into the profile (its minutes times `scale`)."""
    minute = 60 * scale
    if profile == "ramp":
        return 500 + 500 * min(1.0, t / (2 * minute))
    if profile == "spike":
        return 5000 if minute <= t < 6 * minute else 500
    if profile == "knee":
        return KNEE_STEPS[min(int(t // minute), len(KNEE_STEPS) - 1)]
    return 500


DURATION_MINUTES = {"steady": 30, "ramp": 32, "spike": 8, "mix": 10, "knee": None}
KNEE_STEPS = [250, 500, 1000, 2000, 3000, 4000]


def schedule(profile: str, scale: float, per_body: int, seed: int) -> list[tuple[float, int]]:
    """(send offset s, alerts) of every body: body sizes fixed, or 3:7 of 10,000 and 1 for `mix`;
    each body due when the alerts before it have been sent at the profile's rate."""
    minutes = DURATION_MINUTES[profile] or len(KNEE_STEPS)
    seconds = minutes * 60 * scale
    rng = random.Random(seed)
    out, t = [], 0.0
    while t < seconds:
        size = (10_000 if rng.random() < 0.3 else 1) if profile == "mix" else per_body
        out.append((t, size))
        t += size / rate_at(profile, t, scale)
    return out


# An inference deployment's replicas: a body of more alerts than this spans several deployments,
# as a cluster-wide group (KubePodNotReady across a node pool) does.
PODS_PER_DEPLOYMENT = 16


def body_of(number: int, size: int, run: str, sent_at: float) -> bytes:
    """Body `number`: one alert name of a cascade (five names a cascade, in order) over `size`
    pods, PODS_PER_DEPLOYMENT to a deployment, in one of CLUSTERS clusters."""
    story, step = divmod(number, len(POD_NAMES))
    alertname, kind = POD_NAMES[step]
    alerts = []
    for index in range(size):
        deployment = f"vllm-load-{run}-{story}-{index // PODS_PER_DEPLOYMENT}"
        replica = index % PODS_PER_DEPLOYMENT
        pod = f"{deployment}-{replica ^ 1 if kind == 'sibling' else replica}"
        labels = {
            "alertname": alertname,
            "cluster": f"gpu-load-{story % CLUSTERS}",
            "namespace": "llm-serving",
            "severity": "critical" if alertname == "LLMContainerOOMKilled" else "warning",
            "model_name": f"llama-{run}-{story}-{index // PODS_PER_DEPLOYMENT}",
            "pod": pod,
            "container": "vllm",
        }
        alerts.append({"labels": labels, "annotations": {"summary": f"{alertname} on {pod}"},
                       "startsAt": rfc3339(sent_at - 30), "endsAt": rfc3339(sent_at + 3600)})  # fmt: skip
    return webhook_body(alerts)


# The senders -------------------------------------------------------------------------------------


class Senders:
    """Open loop: each body is sent when due (late if every sender is busy: `late` counts it), on
    a keep-alive connection per thread (http.client: the senders share the two cores). A 5xx or
    a connection error is sent again after 0.5 s, doubling to 10 s (Alertmanager's notifier backs
    off alike), until `give_up` s after it was due."""

    def __init__(
        self, url: str, plan: list[tuple[float, int]], run: str, threads: int, give_up: float
    ) -> None:
        self.target = urlsplit(url)
        self.plan, self.run, self.threads, self.give_up = plan, run, threads, give_up
        self.out = Deliveries()
        self.next = 0
        self.lock = threading.Lock()
        self.late = self.retried = self.given_up = self.accepted_alerts = 0
        self.answer_times: list[float] = []

    def go(self) -> float:
        self.started = time.time() + 1
        threads = [threading.Thread(target=self.send_loop, daemon=True) for _ in range(self.threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return time.time()

    def send_loop(self) -> None:
        connection: http.client.HTTPConnection | None = None
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        while True:
            with self.lock:
                number, self.next = self.next, self.next + 1
            if number >= len(self.plan):
                return
            offset, size = self.plan[number]
            due = self.started + offset
            wait = due - time.time()
            if wait > 0:
                time.sleep(wait)
            elif wait < -1:
                with self.lock:
                    self.late += 1
            body, backoff = body_of(number, size, self.run, max(due, time.time())), 0.5
            while True:
                sent = time.time()
                try:
                    connection = connection or http.client.HTTPConnection(
                        self.target.hostname, self.target.port, timeout=30
                    )
                    connection.request("POST", self.target.path, body=body, headers=headers)
                    response = connection.getresponse()
                    payload, status = response.read(), response.status
                    if response.will_close:
                        connection.close()
                        connection = None
                except (OSError, http.client.HTTPException):
                    if connection is not None:
                        connection.close()
                    connection, status, payload = None, 0, b""
                answered = time.time()
                with self.out.lock:
                    self.out.status[status] = self.out.status.get(status, 0) + 1
                    self.answer_times.append(answered - sent)
                if status == 202:
                    self.out.add(int(json.loads(payload)["delivery"]), answered, size)
                    with self.lock:
                        self.accepted_alerts += size
                    break
                if 400 <= status < 500 or answered - due > self.give_up:
                    with self.lock:
                        self.given_up += 1
                    self.out.errors.append(f"{status} {payload[:200]!r}")
                    break
                with self.lock:
                    self.retried += 1
                time.sleep(backoff)
                backoff = min(backoff * 2, 10)


# Memory and CPU ------------------------------------------------------------------------------------


def process_kind(pid: int) -> str | None:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    if "gunicorn" in command:
        return "web (gunicorn)"
    if "celery" in command and " beat" in command:
        return "beat"
    if "celery" in command:
        for kind in ("ingest", "correlation", "evidence"):
            if f"-n {kind}" in command:
                return f"worker {kind}"
        return "worker"
    if "redis-server" in command:
        return "redis"
    if "postgres" in command:
        return "postgres"
    return None


def drill_pids(serve_group: int, postgres: PrivatePostgres, redis: PrivateRedis) -> list[int]:
    """The processes of this run only: bin/serve's group, the private cluster's postmaster and
    its children (backends, checkpointer, WAL writer ...), the private Redis."""
    pids = [int(p) for p in subprocess.run(["pgrep", "-g", str(serve_group)], capture_output=True,
                                           text=True).stdout.split()]  # fmt: skip
    try:
        postmaster = int((postgres.data / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True).stdout
        pids += [postmaster, *map(int, children.split())]
    except (OSError, ValueError, IndexError):
        pass
    if redis.process is not None:
        pids.append(redis.process.pid)
    return pids


class MemoryWatch:
    """Every 5 s, each of the run's processes' peak resident memory so far (VmHWM); the highest
    seen per kind of process."""

    def __init__(self, pids) -> None:
        self.pids = pids
        self.peaks: dict[str, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(5)

    def sample(self) -> None:
        for pid in self.pids():
            kind = process_kind(pid)
            if kind is None:
                continue
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    self.peaks[kind] = max(self.peaks.get(kind, 0), int(line.split()[1]))

    def result(self) -> dict[str, float]:
        self.stop.set()
        self.sample()
        return {kind: round(kib / 1024, 1) for kind, kib in sorted(self.peaks.items())}


def cpu_seconds() -> float:
    """Every process's CPU so far (utime + stime of /proc/stat): the machine's busy seconds."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    busy = sum(int(v) for i, v in enumerate(fields) if i not in (3, 4))  # not idle, not iowait
    return busy / os.sysconf("SC_CLK_TCK")


# The run -------------------------------------------------------------------------------------------


def stopped(signum, frame) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # the `finally` stops every process started


def main() -> int:
    signal.signal(signal.SIGTERM, stopped)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=sorted(DURATION_MINUTES), required=True)
    ap.add_argument("--scale", type=float, default=1.0, help="of the profile's minutes (0.05: a twentieth)")
    ap.add_argument("--per-body", type=int, default=10, help="alerts a body (not for mix)")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--give-up", type=float, default=300, help="s after its due time a sender stops retrying")
    ap.add_argument("--drain-timeout", type=float, default=900)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "drills.jsonl"))
    args = ap.parse_args()

    plan = schedule(args.profile, args.scale, args.per_body, args.seed)
    run = f"{int(time.time()) % 100000}"
    speed = {"python_loop_10m_s": round(min(calibrate.loop_seconds() for _ in range(3)), 3),
             "load_average": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    postgres, redis = PrivatePostgres().init(), PrivateRedis()
    postgres.start()
    redis.start()
    folder = Path(postgres.folder) / "stack"
    stack = Stack(postgres.create_database("rootline_load"), redis.url(0), folder)
    serve = None
    try:
        stack.migrate()
        hook = stack.integration(token=TOKEN)["url"]
        port = free_port()
        stack.extra_env.update({"PORT": str(port), "BIN": str(Path(sys.executable).parent)})
        serve = stack.add("serve", ["bash", "bin/serve"])
        stack.web_ports.append(port)
        wait_for(stack.web_answers, timeout=90, what="bin/serve to answer")
        time.sleep(3)  # the workers' first connections
        memory = MemoryWatch(lambda: drill_pids(serve.pid, postgres, redis))
        senders = Senders(stack.url(hook), plan, run, args.threads, args.give_up)
        done, deadline, latency = threading.Event(), [math.inf], {}
        watcher = threading.Thread(
            target=poller,
            args=(stack.database_url, senders.out, 0.5, done, deadline, latency),
            daemon=True,
        )
        backlog = BacklogWatch(Ledger(stack.database_url))
        cpu_before, started = cpu_seconds(), time.time()
        watcher.start()
        last_sent = senders.go()
        sending = last_sent - senders.started
        ledger = Ledger(stack.database_url)
        settled = True
        try:
            wait_for(lambda: ledger.settled(senders.accepted_alerts), timeout=args.drain_timeout,
                     interval=1, what="the backlog to drain")  # fmt: skip
        except Exception:  # noqa: BLE001 - reported as a failed run, with what was left
            settled = False
        drained = time.time() - last_sent
        deadline[0] = time.time() + 30
        done.set()
        watcher.join(60)
        cpu = cpu_seconds() - cpu_before
        occurrences = ledger.value("SELECT count(*) FROM incidents_alert")
        doubled = ledger.duplicate_roots() + ledger.duplicate_edges()
        result = {
            "profile": args.profile,
            "scale": args.scale,
            "per_body": None if args.profile == "mix" else args.per_body,
            "bodies": len(plan),
            "alerts": sum(size for _, size in plan),
            "pass": settled
            and senders.given_up == 0
            and occurrences == senders.accepted_alerts
            and not doubled
            and ledger.uncorrelated() == 0,
            "lost_bodies": senders.given_up,
            "stored_alerts": occurrences,
            "accepted_alerts": senders.accepted_alerts,
            "doubled": len(doubled),
            "statuses": senders.out.status,
            "retried": senders.retried,
            "late_bodies": senders.late,
            "sending_s": round(sending, 1),
            "accepted_per_s": round(senders.accepted_alerts / sending, 1),
            "answer": summary(senders.answer_times),
            "drain_after_last_s": round(drained, 1) if settled else None,
            "delivery_to_incident": summary(latency.get("lat", {}).get("incident", [])),
            "peak_mib": memory.result(),
            "cpu_s": round(cpu, 1),
            "cpu_share_of_two_cores": round(cpu / (2 * (time.time() - started)), 2),
            "machine": speed,
            "commit": subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
            ).stdout.strip(),  # fmt: skip
            "date": time.strftime("%Y-%m-%d"),
        }
        result["backlog"] = backlog.result(senders.started)
        if args.profile == "knee":
            result["knee"] = knee(plan, backlog.samples, senders, args.scale)
        line = json.dumps(result)
        print(line)
        with open(args.out, "a") as out:
            out.write(line + "\n")
        return 0 if result["pass"] else 1
    finally:
        if serve is not None and serve.popen is not None:
            stop_group(serve.popen)
        stack.stop()
        postgres.destroy()
        redis.destroy()


class BacklogWatch:
    """Every 5 s: the alerts waiting (in deliveries not yet processed, and stored but not yet
    correlated), to see a backlog grow and drain."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.samples: list[tuple[float, int, int]] = []  # (time, pending deliveries, uncorrelated alerts)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self) -> None:
        while not self.stop.wait(5):
            try:
                pending = self.ledger.value(
                    "SELECT count(*) FROM incidents_delivery WHERE status = 'pending'"
                )
                self.samples.append((time.time(), pending, self.ledger.uncorrelated()))
            except Exception:  # noqa: BLE001 - a sample missed is no result lost
                continue

    def result(self, started: float) -> dict:
        self.stop.set()
        if not self.samples:
            return {}
        worst = max(self.samples, key=lambda s: s[1] + s[2])
        return {"peak_pending_deliveries": max(s[1] for s in self.samples),
                "peak_uncorrelated": max(s[2] for s in self.samples),
                "peak_at_s": round(worst[0] - started, 1)}  # fmt: skip


def knee(
    plan: list[tuple[float, int]], samples: list[tuple[float, int, int]], senders: Senders, scale: float
) -> dict:
    """Per step of the knee profile: the rate offered, the alerts accepted in it, and the backlog
    at its end; the knee is the last step it kept up with (accepted >= 95% of offered, and the
    uncorrelated backlog at its end under 10 s of its rate)."""
    minute = 60 * scale
    accepted = [0] * len(KNEE_STEPS)
    for t202, size in senders.out.items.values():
        step = int((t202 - senders.started) // minute)
        if 0 <= step < len(KNEE_STEPS):
            accepted[step] += size
    steps, knee_rate = [], None
    for number, rate in enumerate(KNEE_STEPS):
        bodies = [size for offset, size in plan if number * minute <= offset < (number + 1) * minute]
        offered = sum(bodies)
        end = senders.started + (number + 1) * minute
        near = [sample for sample in samples if sample[0] <= end]
        # alerts waiting at the step's end: in deliveries not yet processed, and not yet correlated
        waiting = near[-1][2] + near[-1][1] * offered / max(1, len(bodies)) if near else None
        kept_up = accepted[number] >= 0.95 * offered and waiting is not None and waiting < 10 * rate
        steps.append(
            {
                "rate": rate,
                "offered": offered,
                "accepted": accepted[number],
                "waiting_at_end": None if waiting is None else int(waiting),
                "kept_up": kept_up,
            }
        )
        if kept_up and (knee_rate is None or knee_rate == KNEE_STEPS[number - 1]):
            knee_rate = rate
    return {"steps": steps, "knee_alerts_per_s": knee_rate}


if __name__ == "__main__":
    sys.exit(main())
