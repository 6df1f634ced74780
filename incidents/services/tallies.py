"""Rootline's own figures for `/metrics`: counters, sums and last-run times (the `Tally` table).

They are made in many processes (Celery workers, beat's sweeps, every web worker) and read by
whichever web worker answers a scrape, so they cannot be in-process counters. They are kept in
the database rather than in Redis: every process already shares it, a figure survives the
restart of any process and a Redis flush (Prometheus would read a lost counter as a reset, and a
lost last-run time as beat never having run), and the demo (SQLite, no Redis) has it too.

What that costs: a task run notes its figures in memory and writes them in one
`INSERT ... ON CONFLICT DO UPDATE` when it ends (`tally_run_start` / `tally_run_finish`, called
around every task by `incidents/task_tallies.py`), outside any transaction, so a worker never
holds a counter row while its work runs; what it noted inside a transaction counts once that
commits (`on_commit`: a rolled-back batch tried again is not counted twice). A worker killed
mid-run loses its run's figures with the run. Outside a task (a webhook, a person's action, a
command) each figure is one such statement in the caller's transaction, committed or rolled back
with the work it counts. A webhook's hot path adds nothing: a delivery stored for a worker is
counted by the worker that reads it, in its batch's statement; only the rare answers that leave
nothing for a worker (a refusal, a body without alerts) add a statement of their own. Writing a
figure never fails the work: a database error is logged and the figure is lost.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.db import DatabaseError, transaction
from django.utils import timezone

from incidents.models import Tally
from incidents.sql import tally_upsert

logger = logging.getLogger(__name__)

# The stored names, as /metrics writes them (counters gain `_total`, summaries `_sum` and `_count`).
DELIVERIES_ACCEPTED = "rootline_deliveries_accepted"
DELIVERIES_REJECTED = "rootline_deliveries_rejected"
DELIVERY_ALERTS_ACCEPTED = "rootline_delivery_alerts_accepted"
DELIVERY_ALERTS_REJECTED = "rootline_delivery_alerts_rejected"
INGEST_DELAY = "rootline_ingest_delay_seconds"
CORRELATION_RUN = "rootline_correlation_run_seconds"
CORRELATION_ERRORS = "rootline_correlation_errors"
EVIDENCE_COLLECTION = "rootline_evidence_collection_seconds"
EVIDENCE_ERRORS = "rootline_evidence_errors"
REMEDIATION_CHECKS = "rootline_remediation_checks"
REMEDIATION_CHECKS_FAILED = "rootline_remediation_checks_failed"
EMAILS_SENT = "rootline_emails_sent"
EMAILS_FAILED = "rootline_emails_failed"
TASKS_FINISHED = "rootline_tasks_finished"
SWEEP_LAST_RUN = "rootline_sweep_last_run_timestamp_seconds"

# Why a delivery was refused: its body had nothing usable (`unreadable`, kept as a rejected
# delivery), it was over ROOTLINE_MAX_BODY, over its integration's rate limit, its token was wrong
# (nothing stored), or a value in it could not be stored.
REJECTION_REASONS = ("unreadable", "too_large", "throttled", "unauthenticated", "unstorable")
EMAIL_KINDS = ("remediation", "review")
# Beat's sweeps (rootline/settings.py, every ROOTLINE_SWEEP_SECONDS): task name -> `sweep` label.
SWEEPS = {
    "incidents.requeue_stale_deliveries": "deliveries",
    "incidents.requeue_uncorrelated": "correlation",
    "incidents.requeue_evidence": "evidence",
}


Row = tuple[str, str, str, float]  # (name, labels, kind, value)


@dataclass
class _Run:
    """The figures one task run noted so far, merged by row."""

    depth: int = 1
    rows: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict)

    def add(self, name: str, labels: str, kind: str, value: float) -> None:
        kept = self.rows.get((name, labels))
        if kept is not None and kind == Tally.Kind.SUM:
            value += kept[1]
        self.rows[(name, labels)] = (kind, value)

    def pending(self) -> list[Row]:
        return [(name, labels, kind, value) for (name, labels), (kind, value) in self.rows.items()]


_RUN: ContextVar[_Run | None] = ContextVar("rootline_tally_run", default=None)


def label_text(labels: dict[str, str]) -> str:
    """The stored form of a figure's labels: JSON with sorted keys ("" for none)."""
    return json.dumps(labels, sort_keys=True, separators=(",", ":")) if labels else ""


def tally_add(name: str, value: float = 1.0, **labels: str) -> None:
    """Add `value` to a counter (or a summary's part)."""
    _note([(name, label_text(labels), Tally.Kind.SUM, float(value))])


def tally_observe(name: str, seconds: float, **labels: str) -> None:
    """One observation of a summary: its `_sum` grows by `seconds`, its `_count` by one."""
    tally_observe_many(name, seconds, 1, **labels)


def tally_observe_many(name: str, seconds: float, count: int, **labels: str) -> None:
    """`count` observations adding up to `seconds` (a batch of deliveries, say)."""
    if count:
        text = label_text(labels)
        _note(
            [
                (f"{name}_sum", text, Tally.Kind.SUM, float(seconds)),
                (f"{name}_count", text, Tally.Kind.SUM, count),
            ]
        )


def tally_stamp(name: str, at: float | None = None, **labels: str) -> None:
    """Set a last-run time (Unix seconds, now by default)."""
    _note([(name, label_text(labels), Tally.Kind.LATEST, time.time() if at is None else float(at))])


@contextmanager
def tally_timed(name: str, *, errors: str) -> Iterator[None]:
    """Observe how long the block took in the summary `name`; a block that raises counts in
    `errors` too (and is timed all the same)."""
    started = time.perf_counter()
    try:
        yield
    except Exception:
        tally_add(errors)
        raise
    finally:
        tally_observe(name, time.perf_counter() - started)


def tally_run_start(*, inside_caller: bool = False) -> None:
    """A task run begins: what it notes is kept until `tally_run_finish`. `inside_caller`: an
    eager task inside another run (or a request) shares the outer run; a worker's task always
    starts afresh (a run whose end was never seen is written first)."""
    run = _RUN.get()
    if run is not None and inside_caller:
        run.depth += 1
        return
    if run is not None:
        _write_after_commit(run.pending())
    _RUN.set(_Run())


def tally_run_finish() -> None:
    """The task run ended: what it noted is written in one statement, after any open transaction
    commits."""
    run = _RUN.get()
    if run is None:
        return
    run.depth -= 1
    if run.depth > 0:
        return
    _RUN.set(None)
    _write_after_commit(run.pending())


def _note(rows: list[Row]) -> None:
    if _RUN.get() is None:
        _write(rows)
    else:
        # A lambda, not a partial: Django names a failing callback by its __qualname__.
        transaction.on_commit(lambda: _record(rows), robust=True)


def _record(rows: list[Row]) -> None:
    run = _RUN.get()
    if run is None:
        _write(rows)
        return
    for row in rows:
        run.add(*row)


def _write_after_commit(rows: list[Row]) -> None:
    if rows:
        transaction.on_commit(lambda: _write(rows), robust=True)


def _write(rows: list[Row]) -> None:
    """In a savepoint inside a transaction, so a failed write cannot spoil the caller's."""
    try:
        with (
            transaction.atomic(savepoint=True)
            if transaction.get_connection().in_atomic_block
            else nullcontext()
        ):
            tally_upsert(Tally, rows, timezone.now())
    except DatabaseError:
        logger.warning("Rootline's own figures not written (%d rows)", len(rows), exc_info=True)
