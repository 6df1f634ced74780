#!/usr/bin/env python3
"""CPU seconds per kind of process (APP_PGID=<pgid of bin/serve>: only that group counts as the
app), from /proc (Linux): `cpu.py snap FILE` then `cpu.py diff FILE LABEL`.

Kinds: gunicorn, celery worker (ingestion), celery correlation, celery evidence, celery beat,
postgres, redis, load client (peer_bench.py), other."""

from __future__ import annotations

import json
import os
import sys

TICK = os.sysconf("SC_CLK_TCK")


APP_PGID = int(os.environ.get("APP_PGID", "0") or 0)


def kind(cmd: str, pgid: int) -> str:
    if ("gunicorn" in cmd or "celery" in cmd) and APP_PGID and pgid != APP_PGID:
        return "other"  # someone else's app on this machine
    if "gunicorn" in cmd:
        return "gunicorn"
    if "celery" in cmd and "correlation" in cmd:
        return "celery_correlation"
    if (
        "celery" in cmd and "evidence" in cmd
    ):  # counted apart: inside celery_worker it hid a storm's collections
        return "celery_evidence"
    if "celery" in cmd and " beat" in cmd:
        return "celery_beat"
    if "celery" in cmd:
        return "celery_worker"
    if cmd.startswith("postgres"):
        return "postgres"
    if "redis-server" in cmd:
        return "redis"
    if "peer_bench.py" in cmd or "drain.py" in cmd or "end_to_end.py" in cmd:
        return "load_client"
    return "other"


def snap() -> dict[str, float]:
    out: dict[str, float] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        secs = (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
        out[f"{pid}|{kind(cmd, int(fields[2]))}"] = secs
    return out


def diff(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per kind between two `snap()`s (processes that exited in between are lost)."""
    per: dict[str, float] = {}
    for key, secs in after.items():
        per[key.split("|")[1]] = per.get(key.split("|")[1], 0.0) + secs - before.get(key, 0.0)
    return {k: round(v, 2) for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v >= 0.01}


def main() -> None:
    action, path = sys.argv[1], sys.argv[2]
    if action == "snap":
        with open(path, "w") as f:
            json.dump({"t": float(open("/proc/uptime").read().split()[0]), "cpu": snap()}, f)
        return
    with open(path) as f:
        before = json.load(f)
    now = snap()
    wall = float(open("/proc/uptime").read().split()[0]) - before["t"]
    label = sys.argv[3] if len(sys.argv) > 3 else ""
    print(
        json.dumps(
            {"mode": "cpu", "label": label, "wall_s": round(wall, 2), "cpu_s": diff(before["cpu"], now)}
        )
    )


if __name__ == "__main__":
    main()
