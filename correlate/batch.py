"""Batch correlation over several processes: clusters are independent, so they can be split.

The engine never links alerts of two clusters (each cluster is its own partition, see
engine.py), so a batch can hand whole clusters to forked worker processes and merge their
incidents, sorted as `Correlator.incidents()` sorts them; the answer is the same as one process
gives. Human merges and splits can join incidents across clusters, so a batch with any runs in
one process. Only where `fork` exists (Linux): the children inherit the alerts and the catalog
instead of receiving them pickled, and send back their incidents in pickled chunks, which this
process unpickles as they come once it has correlated its own share.

Forking a process that runs other threads is unsafe (a lock another thread holds stays held in
the child), so `correlate()` forks only when asked to (`processes`), as the command line does.
`correlate()` is the batch entry point: one process or several, the same answer as feeding the
alerts one by one to a `Correlator`.
"""

from __future__ import annotations

import gc
import os
import pickle
import queue
import signal
import threading
import traceback
from collections.abc import Iterable, Sequence
from typing import BinaryIO

from correlate.catalog import Catalog, load_catalog
from correlate.engine import Correlator
from correlate.events import Alert, occurrence_key
from correlate.results import Decision, Incident, Merge, Split
from correlate.scope import cluster_of as topology_cluster_of

# Below this many alerts a fork, pickling and unpickling cost more than the second core saves.
MIN_ALERTS_TO_SPLIT = 5_000
# A worker's share also pays for pickling its incidents, and this process unpickles them as they
# come, all but the last chunk while the worker still pickles: shares are balanced with that, as
# fractions of correlating them (measured on bench_engine's day of alerts).
_PICKLE_SHARE = 0.25
_UNPICKLE_SHARE = 0.02
_CHUNK = 1_000  # incidents to a pickled chunk


def can_split(alerts: Sequence[Alert], decisions: Sequence[Decision], processes: int) -> bool:
    return (
        processes > 1
        and len(alerts) >= MIN_ALERTS_TO_SPLIT
        and hasattr(os, "fork")
        and not any(isinstance(decision, (Merge, Split)) for decision in decisions)
    )


def cluster_of(alert: Alert) -> str:
    """The engine's partition of an alert (topology.cluster_of)."""
    return topology_cluster_of(alert.labels)


def shares_by_cluster(alerts: Sequence[Alert], count: int) -> list[list[Alert]]:
    """At most `count` shares of whole clusters, about equal in work, the first one this
    process's, each in arrival order."""
    shares = []
    for numbers in _balanced(_cluster_groups(alerts), count):
        numbers.sort()  # arrival order within a share, as the serial run sees it
        shares.append([alerts[n] for n in numbers])
    return [share for share in shares if share]


def _cluster_groups(alerts: Sequence[Alert]) -> dict[str, list[int]]:
    """Alert positions by cluster. An occurrence sent again under another cluster label (an
    Events-API dedup key reused, say) is the engine's business in both clusters, so those form
    one group."""
    by_cluster: dict[str, list[int]] = {}
    first_cluster: dict[str, str] = {}
    mixed: set[str] = set()  # fingerprints seen under two clusters (a change summary made in several)
    for number, alert in enumerate(alerts):
        cluster = cluster_of(alert)
        if first_cluster.setdefault(alert.fingerprint, cluster) != cluster:
            mixed.add(alert.fingerprint)
        numbers = by_cluster.get(cluster)
        if numbers is None:
            numbers = by_cluster[cluster] = []
        numbers.append(number)
    together = _Together()
    filed: dict[str, str] = {}
    for alert in alerts if mixed else ():
        if alert.fingerprint in mixed:  # only those need the exact occurrence key
            cluster = cluster_of(alert)
            first = filed.setdefault(occurrence_key(alert.fingerprint, alert.starts_at), cluster)
            if first != cluster:
                together.join(first, cluster)
    groups: dict[str, list[int]] = {}
    for cluster, numbers in by_cluster.items():
        groups.setdefault(together.find(cluster), []).extend(numbers)
    return groups


def _balanced(groups: dict[str, list[int]], count: int) -> list[list[int]]:
    """Groups dealt to at most `count` shares, biggest first, each where the last share to
    finish finishes soonest."""
    sizes = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    loads = [0.0] * min(count, len(sizes))
    picked: list[list[int]] = [[] for _ in loads]
    for _, numbers in sizes:
        share = min(range(len(loads)), key=lambda s: (max(_loads_with(loads, s, len(numbers))), s))
        loads = _loads_with(loads, share, len(numbers))
        picked[share].extend(numbers)
    return picked


class _Together:
    """Clusters that must be correlated in one process (a tiny union-find)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, cluster: str) -> str:
        while self.parent.get(cluster, cluster) != cluster:
            cluster = self.parent[cluster]
        return cluster

    def join(self, a: str, b: str) -> None:
        a, b = sorted((self.find(a), self.find(b)))
        if a != b:
            self.parent[b] = a


def _loads_with(loads: list[float], share: int, alerts: int) -> list[float]:
    """Each share's work after giving it `alerts` more: a worker's alerts cost a little more
    (pickled there) and add to this process's work (unpickled here)."""
    loads = loads[:]
    if share == 0:
        loads[0] += alerts
    else:
        loads[share] += alerts * (1 + _PICKLE_SHARE)
        loads[0] += alerts * _UNPICKLE_SHARE
    return loads


def correlate_split(
    alerts: Sequence[Alert], decisions: Sequence[Decision], catalog: Catalog, processes: int
) -> list[Incident]:
    """`correlate()` with clusters shared among `processes` processes (this one included)."""
    shares = shares_by_cluster(alerts, processes)
    workers = [_fork(share, decisions, catalog) for share in shares[1:]]
    try:
        incidents = correlate_here(shares[0], decisions, catalog)
        for pid, answer in workers:
            incidents.extend(_received(pid, answer))
    finally:
        for pid, answer in workers:
            _reap(pid, answer)
    incidents.sort(key=lambda incident: (incident.started_at, incident.id))
    return incidents


def _fork(share: list[Alert], decisions: Sequence[Decision], catalog: Catalog) -> tuple[int, int]:
    """A worker correlating `share`; returns its pid and the pipe its answer comes through.

    A bare fork, not `multiprocessing`: its children run the after-fork hooks libraries register
    (kombu's closes its broker connections, reading from sockets the parent still uses), and
    a Django process has them. The worker runs only the engine and leaves with `os._exit`, so no
    finaliser, atexit hook or buffered output of the parent runs twice."""
    answer, out = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(answer)
            with os.fdopen(out, "wb") as pipe:
                _work(share, decisions, catalog, pipe)
            code = 0
        finally:
            os._exit(code)
    os.close(out)
    return pid, answer


def _work(share: list[Alert], decisions: Sequence[Decision], catalog: Catalog, pipe: BinaryIO) -> None:
    """In a worker: one share's incidents written to `pipe` as pickled chunks, then an end mark
    (or the error). Chunks let the parent unpickle one while this process pickles the next; a
    thread writes them, so that pickling goes on while the parent, still correlating its own
    share, has not begun to read (a pipe holds 64 KiB)."""
    chunks: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    writer = threading.Thread(target=_write_all, args=(chunks, pipe))
    writer.start()
    try:
        incidents = correlate_here(share, decisions, catalog)
        for start in range(0, len(incidents), _CHUNK):
            chunks.put(
                pickle.dumps(
                    ("incidents", incidents[start : start + _CHUNK]), protocol=pickle.HIGHEST_PROTOCOL
                )
            )
        chunks.put(pickle.dumps(("end", None)))
    except BaseException:  # noqa: BLE001 - the parent raises it
        chunks.put(pickle.dumps(("error", traceback.format_exc())))
    finally:
        chunks.put(None)
        writer.join()


def _write_all(chunks: queue.SimpleQueue[bytes | None], pipe: BinaryIO) -> None:
    while (chunk := chunks.get()) is not None:
        pipe.write(chunk)


def _received(pid: int, answer: int) -> list[Incident]:
    incidents: list[Incident] = []
    with os.fdopen(answer, "rb", closefd=False) as pipe:
        while True:
            try:
                kind, value = pickle.load(pipe)
            except EOFError:
                raise RuntimeError(
                    f"a batch correlation worker (pid {pid}) ended without its whole answer "
                    f"(exit code {_reap(pid, answer)})"
                ) from None
            if kind == "end":
                return incidents
            if kind == "error":
                raise RuntimeError(f"a batch correlation worker failed:\n{value}")
            incidents.extend(value)


def _reap(pid: int, answer: int) -> int | None:
    """Close the worker's pipe and wait for it (killed if it has not ended); its exit code."""
    try:
        os.close(answer)
    except OSError:
        pass  # closed already
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            done, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return None  # reaped already
    return os.waitstatus_to_exitcode(status)


def usable_processes(requested: int | None) -> int:
    """`requested` processes, or with None (or 0) one per CPU this process may run on."""
    if requested:
        return max(1, requested)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def correlate(
    alerts: Iterable[Alert],
    decisions: Iterable[Decision] = (),
    catalog: Catalog | None = None,
    *,
    processes: int = 1,
) -> list[Incident]:
    """Batch correlation: the same answer as feeding `alerts` one by one to a Correlator.

    With `processes` > 1 (and fork available), clusters are shared among that many processes,
    this one included (`correlate_split`); the answer is the same. Fork only from a process
    that runs no other threads.

    The cyclic garbage collector is paused for the call: a batch builds millions of long-lived
    objects and no garbage cycles worth reclaiming, and the repeated full collections over that
    growing heap were a large share of the run. It is re-enabled (if it was on) before returning.
    """
    alerts = alerts if isinstance(alerts, (list, tuple)) else list(alerts)
    decisions = list(decisions)
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        catalog = catalog or load_catalog()
        if can_split(alerts, decisions, processes):
            return correlate_split(alerts, decisions, catalog, processes)
        return correlate_here(alerts, decisions, catalog)
    finally:
        if paused:
            gc.enable()


def correlate_here(
    alerts: Sequence[Alert], decisions: Sequence[Decision], catalog: Catalog
) -> list[Incident]:
    """The batch in this process, the collector as the caller left it (correlate() pauses it)."""
    correlator = Correlator(catalog, decisions)
    correlator._ingest(alerts)
    return correlator.incidents()
