#!/usr/bin/env python3
"""How fast this machine runs plain Python right now: one JSON line, to read next to a bench's figures.

    python3 bench/calibrate.py          # {"mode": "calibration", "python_loop_10m_s": ..., ...}

The same code has measured markedly slower on one day than on the day before (bench/results/history.md), so
a figure means little without the machine's speed at the time. The loop adds 10 million integers
(best of 3, CPU time); the load average says how busy the machine was.
"""

from __future__ import annotations

import json
import os
import platform
import time


def loop_seconds(count: int = 10_000_000) -> float:
    began = time.process_time()
    total = 0
    for number in range(count):
        total += number
    return time.process_time() - began


def main() -> int:
    best = min(loop_seconds() for _ in range(3))
    print(
        json.dumps(
            {
                "mode": "calibration",
                "python_loop_10m_s": round(best, 3),
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
