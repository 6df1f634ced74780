"""A correlation worker freezes what survives each run, so collections stop walking its kept engine
states; objects that die frozen are freed when a state is dropped, and after many runs."""

from __future__ import annotations

import gc
import weakref

import pytest

from incidents import services
from incidents.models import Alert, Decision
from incidents.services.correlation import correlation_run
from incidents.services.correlation.state import KEPT
from incidents.tasks import process_delivery
from rootline import gc_pause
from rootline.gc_pause import freeze_run_survivors
from tests.incidents.test_correlation_state import bodies

pytestmark = pytest.mark.django_db


class Cycle:
    """An object in a reference cycle with itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def heap_as_before(monkeypatch):
    KEPT.clear()
    monkeypatch.setattr(gc_pause, "_runs_since_full_collection", 0)
    monkeypatch.setattr(gc_pause, "_full_collection_due", False)
    yield
    KEPT.clear()
    gc.unfreeze()
    gc.collect()


def frozen_dead_cycle() -> weakref.ref:
    """A cycle that is alive when a run's survivors are frozen, and dies frozen."""
    cycle = Cycle()
    freeze_run_survivors(state_dropped=False)
    dead = weakref.ref(cycle)
    del cycle
    return dead


def test_run_survivors_are_frozen_and_collections_skip_them():
    dead = frozen_dead_cycle()
    assert gc.get_freeze_count() > 0
    gc.collect()
    assert dead() is not None  # frozen: a full collection does not walk it
    freeze_run_survivors(state_dropped=False)
    assert dead() is not None  # nor does the collection after the next run


def test_a_run_is_frozen_without_a_collection_of_its_own():
    # A cycle that died during the run (the collector paused) is frozen with the survivors: a
    # collection per run found next to nothing in a storm and cost 3% of the worker's CPU.
    cycle = Cycle()
    dead = weakref.ref(cycle)
    del cycle
    freeze_run_survivors(state_dropped=False)
    assert dead() is not None
    freeze_run_survivors(state_dropped=True)
    assert dead() is None


def test_a_dropped_state_unfreezes_and_collects_everything():
    dead = frozen_dead_cycle()
    freeze_run_survivors(state_dropped=True)
    assert dead() is None
    assert gc.get_freeze_count() > 0  # and what lives is frozen again


def test_dead_cycles_wait_for_a_dropped_state_or_many_runs(monkeypatch):
    monkeypatch.setattr(gc_pause, "RUNS_BETWEEN_FULL", 5)
    dead = frozen_dead_cycle()  # the first run
    for _ in range(3):
        freeze_run_survivors(state_dropped=False)
    assert dead() is not None  # four runs: the states may grow, nothing else brings a full collection
    freeze_run_survivors(state_dropped=False)
    assert dead() is None  # the fifth run since the last full collection (here: since the start)


def test_a_failed_run_frees_the_state_it_took_at_the_next_run(make_integration, tmp_path, monkeypatch):
    from correlate import simulator
    from incidents.services.correlation import run

    simulator.simulate("fleet-day", "2026-03-14T06:00:00Z", 11, str(tmp_path))
    receive_all(make_integration("alertmanager"), tmp_path / "alerts.jsonl")
    key = Alert.objects.values_list("correlation_key", flat=True).order_by("correlation_key").first()
    correlation_run(key=key, keep_state=True)
    state = KEPT.take(key)
    old_engine = weakref.ref(state.correlator)
    KEPT.keep(key, state)
    del state

    Alert.objects.filter(correlation_key=key).update(correlated=False)
    with monkeypatch.context() as patched:

        def fails(*args, **kwargs):
            raise RuntimeError("the database went away")

        patched.setattr(run, "incidents_sync", fails)
        with pytest.raises(RuntimeError):
            correlation_run(key=key, keep_state=True)
    assert KEPT.take(key) is None  # the run took the state and lost it
    assert old_engine() is not None  # frozen: no collection reaches it yet

    freeze_run_survivors(state_dropped=False)  # the next run
    assert old_engine() is None


def receive_all(hook, path) -> None:
    for body in bodies(path):
        process_delivery(services.delivery_receive(integration=hook, body=body, headers={}).body["delivery"])


def test_a_worker_run_freezes_its_state_and_a_rebuild_frees_the_old_one(make_integration, tmp_path):
    from correlate import simulator

    simulator.simulate("fleet-day", "2026-03-14T06:00:00Z", 11, str(tmp_path))
    receive_all(make_integration("alertmanager"), tmp_path / "alerts.jsonl")
    key = Alert.objects.values_list("correlation_key", flat=True).order_by("correlation_key").first()
    correlation_run(key=key, keep_state=True)
    state = KEPT.take(key)
    assert state is not None
    frozen = gc.get_freeze_count()
    assert frozen > 0
    old_engine = weakref.ref(state.correlator)
    KEPT.keep(key, state)
    del state

    # A person's decision makes the kept state stale: the next run rebuilds it from the window
    # and drops the old one, whose engine (a web of reference cycles) must then be freed.
    alert = Alert.objects.filter(correlation_key=key).first()
    Decision.objects.create(
        correlation_key=key, kind=Decision.Kind.EXCLUDE, alert_keys=[alert.key], at=alert.starts_at
    )
    Alert.objects.filter(pk=alert.pk).update(correlated=False)
    correlation_run(key=key, keep_state=True)
    assert KEPT.take(key) is not None
    assert old_engine() is None
