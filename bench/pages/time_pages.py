#!/usr/bin/env python3
"""Time pages and API reads as a signed-in person gets them, against whatever DATABASE_URL holds.

Meant for a database a storm left behind (bench/correlate/end_to_end.py keeps `rootline_bench_e2e`
until its next run: 125,066 alerts, ~840 incidents of up to ~950 alerts):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rootline_bench_e2e \\
        .venv/bin/python bench/pages/time_pages.py / /api/v1/incidents/ /incidents/221/

Each path is requested --repeat times (2) through Django's test client (no HTTP server: the
view, its queries and its template) by a user `pagetimer` in the responder group, created if
missing; prints path, status, wall ms, response size and query count per request, and with
`--slowest N` the N slowest queries of each (Django's own timing of each query).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rootline.settings")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--slowest", type=int, default=0, help="also print this many slowest queries of each request"
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    user, _ = User.objects.get_or_create(username="pagetimer")
    user.groups.add(Group.objects.get_or_create(name="responder")[0])
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    for path in args.paths:
        for _ in range(args.repeat):
            with CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                response = client.get(path)
                wall = time.perf_counter() - began
            print(
                f"{path} {response.status_code} {wall * 1000:.0f} ms "
                f"{len(response.content) / 1e6:.2f} MB {len(queries)} queries"
            )
            for query in sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[: args.slowest]:
                print(f"    {float(query['time']) * 1000:7.1f} ms  {query['sql'][:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
