"""The rules pack's objective recordings (`llmops:slo_*`) for the known history's nine weeks
(2026-W39 to 2026-W47), as an OpenMetrics export imported into the local series store, for the
review's objectives to be read the way a team without Prometheus reads them.

llama-70b's p99 TTFT is 1.2 s except while A ran (2026-W47, Monday 09:55 to 11:45: 23 windows
at 3.5 s, past the week's budget of 20.16), while the earlier incident ran (W45, 11 windows)
and for 20 minutes in W46; its TPOT holds throughout. Its gateway serves 10 requests a second
with 0.002 failing, and 1 a second failing while A ran."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from incidents.services.local_series import local_series_import
from tests.review.history import MONDAY, at

STEP = 300
FIRST = MONDAY - timedelta(weeks=8)
LAST = MONDAY + timedelta(weeks=1)
SLOW = ((at(0, 9, 55), at(0, 11, 45)), (at(-14, 3, 5), at(-14, 3, 55)), (at(-6, 8, 5), at(-6, 8, 20)))
FAILING = ((at(0, 9, 55), at(0, 11, 45)),)
LABELS = 'model_name="llama-70b",slo_source="%s"'


def during(moment, spans) -> bool:
    return any(start <= moment <= end for start, end in spans)


def export_text() -> str:
    lines = []
    for metric, source, value in (
        ("llmops:slo_ttft_p99_seconds:5m", "engine", lambda m: 3.5 if during(m, SLOW) else 1.2),
        ("llmops:slo_tpot_p99_seconds:5m", "engine", lambda m: 0.05),
        ("llmops:slo_requests:rate5m", "gateway", lambda m: 10.0),
        ("llmops:slo_request_errors:rate5m", "gateway", lambda m: 1.0 if during(m, FAILING) else 0.002),
    ):
        lines.append(f"# TYPE {metric.replace(':', '_')} gauge")
        moment = FIRST
        while moment <= LAST:
            lines.append("%s{%s} %s %d" % (metric, LABELS % source, value(moment), moment.timestamp()))
            moment += timedelta(seconds=STEP)
    return "\n".join(lines) + "\n# EOF\n"


def import_objective_series(folder: Path) -> None:
    path = folder / "objectives.om"
    path.write_text(export_text(), encoding="utf-8")
    local_series_import(path=path)
