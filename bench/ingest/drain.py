#!/usr/bin/env python3
"""Poll GET /api/v1/alerts/?page_size=1 until `count` reaches --expect (or --timeout passes).

Prints one JSON line: the count reached, when (unix time), and the time since --since. Stdlib only.
Loopback only."""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from urllib.parse import urlparse


def count(url: str, token: str) -> int:
    req = urllib.request.Request(
        url, headers={"Authorization": f"Token {token}", "Accept": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as response:
        return int(json.load(response)["count"])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="http://127.0.0.1:PORT")
    ap.add_argument("--token", required=True)
    ap.add_argument("--expect", type=int, required=True)
    ap.add_argument("--since", type=float, default=None, help="unix time the load started")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    host = urlparse(args.base).hostname or ""
    if not host.startswith("127.") and host not in ("localhost", "::1"):
        sys.exit(f"refusing non-loopback target {host!r}")
    url = args.base.rstrip("/") + "/api/v1/alerts/?page_size=1"
    started = time.time()
    deadline = started + args.timeout
    seen = -1
    polls = 0
    while True:
        polls += 1
        try:
            seen = count(url, args.token)
        except Exception as exc:  # noqa: BLE001 - keep polling through a transient error
            print(f"poll error: {exc!r}", file=sys.stderr)
        now = time.time()
        if seen >= args.expect or now > deadline:
            break
        time.sleep(args.interval)
    since = args.since if args.since is not None else started
    out = {
        "mode": "drain",
        "label": args.label,
        "expect": args.expect,
        "count": seen,
        "complete": seen >= args.expect,
        "done_at": round(now, 3),
        "drain_after_poll_start_s": round(now - started, 3),
        "since_load_start_s": round(now - since, 3),
        "polls": polls,
    }
    print(json.dumps(out))
    return 0 if out["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
