"""Pausing Python's cyclic garbage collector around work that builds many objects and few cycles."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block; what it leaves is collected after it, as usual.

    The ingestion drain's parsed alerts (50,000 in a batch of 100-alert bodies) and a correlation
    run's engine objects hold few cycles and are freed by reference counting, but every collection
    walked them again, and in the correlation worker every state it keeps: a large share of the
    ingestion worker's CPU per alert, and of a storm correlation run's
    (`bench/correlate/storm_cluster.py --gc on|paused` compares the two)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# A worker's frozen heap is unfrozen and collected whole after this many runs, when a run dropped
# a kept state, and after a failed run (which loses the state it took).
RUNS_BETWEEN_FULL = 1_000
_runs_since_full_collection = 0
_full_collection_due = False


def freeze_run_survivors(*, state_dropped: bool) -> None:
    """After a correlation worker's run: freeze what the run left (and whatever came since the
    last run), so that no collection walks the kept engine states of every key again. Full
    collections over those states are long, and at a storm's pace they came every few runs
    (bench/correlate/storm_worker.py).

    The run's objects are frozen without a collection first: through a storm's runs those
    collections found next to nothing unreachable and cost CPU for it
    (`bench/correlate/storm_worker.py --every 120 --hold-rankings`); what a run's pause on the
    collector left behind is little, and it cannot grow between two full collections by more
    than `RUNS_BETWEEN_FULL` runs of it.

    A frozen object that dies in a reference cycle stays until the heap is unfrozen and collected
    whole. That is done when a kept state was dropped (the engine is a web of cycles, and the
    bulk of what dies frozen), after a failed run (`full_collection_due`), and every
    `RUNS_BETWEEN_FULL` runs, for whatever else died frozen: little, as a kept state only grows
    between its rebuilds. Full collections each time the held alerts had doubled found next to
    nothing unreachable through a storm's runs and were most of their collection time; that
    rule is gone. (`gc.get_freeze_count()` would say how big the frozen heap is, but it counts it
    object by object, too slow to ask after every run in a storm.)"""
    global _runs_since_full_collection, _full_collection_due
    _runs_since_full_collection += 1
    if state_dropped or _full_collection_due or _runs_since_full_collection >= RUNS_BETWEEN_FULL:
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        _runs_since_full_collection = 0
        _full_collection_due = False
        return
    gc.freeze()


def full_collection_due() -> None:
    """A run failed: the kept state it took is lost, frozen; the next freeze collects everything."""
    global _full_collection_due
    _full_collection_due = True
