"""The debounce of correlation runs: one pending run per key, its flag taken only after commit.

Taken inside the caller's transaction, the flag let a queued run start, clear it and read the
key's window before the new alerts were committed; their own enqueue had found the flag set,
so no run followed and they stayed uncorrelated (and a rolled-back transaction left the flag
with no task behind it)."""

from __future__ import annotations

from datetime import UTC
from unittest import mock

import pytest
from django.core.cache import cache
from django.db import transaction

from incidents import flow

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    flags = [flow.pending_flag("c1"), flow.next_run_flag("c1"), flow.ranking_flag("c1")]
    cache.delete_many(flags)
    with mock.patch("incidents.tasks.correlate_key.apply_async") as apply_async:
        yield apply_async
    cache.delete_many(flags)


def test_the_flag_is_taken_after_commit_and_one_run_is_queued(queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            flow.correlation_enqueue(["c1", "c1"])
            assert cache.get(flow.pending_flag("c1")) is None  # a run starting now leaves room for the next
            queued.assert_not_called()
    queued.assert_called_once_with(("c1",), queue="rootline-correlation")
    assert cache.get(flow.pending_flag("c1")) == 1
    with django_capture_on_commit_callbacks(execute=True):
        flow.correlation_enqueue(["c1"])  # already pending: nothing more
    queued.assert_called_once()


def test_a_rolled_back_transaction_leaves_no_flag_and_queues_nothing(
    queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError):
            with transaction.atomic():
                flow.correlation_enqueue(["c1"])
                raise RuntimeError("the batch failed")
    queued.assert_not_called()
    assert cache.get(flow.pending_flag("c1")) is None


def test_with_shards_a_key_always_goes_to_the_same_queue_and_keys_spread(
    queued, settings, django_capture_on_commit_callbacks
):
    settings.CORRELATION_SHARDS = 3
    keys = [f"cluster-{n}" for n in range(30)]
    for key in keys:
        cache.delete(flow.pending_flag(key))
    with django_capture_on_commit_callbacks(execute=True):
        flow.correlation_enqueue(keys)
    queues = {call.args[0][0]: call.kwargs["queue"] for call in queued.call_args_list}
    assert set(queues) == set(keys)
    assert set(queues.values()) == {
        "rootline-correlation-0",
        "rootline-correlation-1",
        "rootline-correlation-2",
    }
    assert all(flow.correlation_queue(key) == queue for key, queue in queues.items())
    for key in keys:
        cache.delete(flow.pending_flag(key))


def test_a_key_that_just_ran_waits_twice_its_last_run_at_most_a_pace(
    queued, settings, django_capture_on_commit_callbacks
):
    settings.CORRELATION_PACE_SECONDS = 0.25
    with django_capture_on_commit_callbacks(execute=True):
        flow.correlation_enqueue(["c1"])  # quiet until now: at once
    assert "countdown" not in queued.call_args.kwargs
    for run_seconds, longest in ((0.05, 0.1), (2.0, 0.25)):
        cache.delete(flow.pending_flag("c1"))  # the run starts: it clears the flag, runs, notes its length
        flow.note_run_finished("c1", run_seconds)
        with django_capture_on_commit_callbacks(execute=True):
            flow.correlation_enqueue(["c1"])
        assert longest - 0.05 < queued.call_args.kwargs["countdown"] <= longest


@pytest.mark.parametrize(
    ("pace", "last_run_seconds", "paced"),
    [
        (0.25, 0.001, True),  # after a cheap run the next goes at once
        (0.25, 1.0, False),  # a slice that left alerts waiting re-queues its key unpaced
        (0, 1.0, True),  # no pace
    ],
    ids=["cheap-last-run", "slice-requeue", "no-pace"],
)
def test_queued_at_once(queued, settings, pace, last_run_seconds, paced):
    settings.CORRELATION_PACE_SECONDS = pace
    flow.note_run_finished("c1", last_run_seconds)
    flow.correlation_enqueue_now(["c1"], paced=paced)
    queued.assert_called_once_with(("c1",), queue="rootline-correlation")


def test_a_run_queued_during_the_last_one_waits_its_pace_when_it_starts(queued, settings):
    from incidents.tasks import correlate_key

    settings.CORRELATION_PACE_SECONDS = 0.25
    cache.set(flow.pending_flag("c1"), 1)
    flow.note_run_finished("c1", 0.05)  # the run before ended just now and asked for 0.1 s
    with mock.patch("incidents.services.correlation.correlation_run") as run:
        correlate_key("c1")
    run.assert_not_called()
    assert 0.05 < queued.call_args.kwargs["countdown"] <= 0.1
    assert cache.get(flow.pending_flag("c1")) == 1  # still pending: no second run is queued meanwhile
    cache.delete(flow.next_run_flag("c1"))
    with mock.patch("incidents.services.correlation.correlation_run") as run:
        correlate_key("c1")
    run.assert_called_once_with(key="c1", keep_state=True)


def test_a_run_queued_for_held_rankings_keeps_no_new_alert_waiting(
    queued, django_capture_on_commit_callbacks
):
    """The run a worker queues for the big incidents whose ranking it held back (due in up to 5 s)
    has a flag of its own: sharing the pending flag, it kept the deliveries of those seconds from
    queueing a run, and their alerts waited for it."""
    from incidents.tasks import correlate_key

    flow.correlation_enqueue_later("c1", 4.0)
    queued.assert_called_once_with(
        ("c1",), {"held_ranking": True}, queue="rootline-correlation", countdown=4.0
    )
    flow.correlation_enqueue_later("c1", 4.0)  # one is queued already: nothing more
    assert queued.call_count == 1
    with django_capture_on_commit_callbacks(execute=True):
        flow.correlation_enqueue(["c1"])  # new alerts: a run now, not in 4 s
    assert queued.call_count == 2 and queued.call_args == mock.call(("c1",), queue="rootline-correlation")
    with mock.patch("incidents.services.correlation.correlation_run") as run:
        correlate_key(
            "c1", held_ranking=True
        )  # the held-ranking run starts: the next run holding some back may ask again
    run.assert_called_once_with(key="c1", keep_state=True)
    assert cache.get(flow.ranking_flag("c1")) is None
    flow.correlation_enqueue_later("c1", 4.0)
    assert queued.call_count == 3


def test_beat_requeues_the_keys_whose_alerts_no_run_took(queued, settings):
    """Alerts stored while the run's enqueue failed (broker or cache down at commit) are not left
    for the cluster's next delivery: beat's sweep queues their key, once however often it runs."""
    from datetime import datetime

    from incidents.models import Alert, Integration
    from incidents.tasks import requeue_uncorrelated

    at = datetime(2026, 1, 5, 3, 0, tzinfo=UTC)
    integration = Integration.objects.create(kind="alertmanager", name="sweep", token_digest="x")
    for number, (key, correlated) in enumerate([("c1", False), ("c1", False), ("done", True)]):
        Alert.objects.create(
            fingerprint=f"sweep-{number}",
            starts_at=at,
            status="firing",
            labels={"alertname": "X"},
            integration=integration,
            received_at=at,
            correlation_key=key,
            correlated=correlated,
        )
    assert requeue_uncorrelated() == 1
    queued.assert_called_once_with(("c1",), queue="rootline-correlation")
    requeue_uncorrelated()  # its run still queued: nothing more
    queued.assert_called_once()


def test_keys_with_a_run_queued_cost_one_read_for_all(queued):
    """An ingestion batch in a storm names keys whose runs are queued already: one read of all
    their flags, and a flag taken (and a run queued) only for the others."""
    cache.delete(flow.pending_flag("c2"))
    cache.set(flow.pending_flag("c1"), 1)
    with mock.patch.object(cache, "add", wraps=cache.add) as add:
        flow.correlation_enqueue_now(["c1", "c2"])
    assert [call.args[0] for call in add.call_args_list] == [flow.pending_flag("c2")]
    queued.assert_called_once_with(("c2",), queue="rootline-correlation")
    cache.delete(flow.pending_flag("c2"))
