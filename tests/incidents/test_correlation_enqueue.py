"""The debounce of correlation runs: one pending run per key, its flag taken only after commit.

Taken inside the caller's transaction, the flag let a queued run start, clear it and read the
key's window before the new alerts were committed; their own enqueue had found the flag set,
so no run followed and they stayed uncorrelated (and a rolled-back transaction left the flag
with no task behind it)."""
from __future__ import annotations

from unittest import mock

import pytest
from django.core.cache import cache
from django.db import transaction

from incidents import correlation

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    cache.delete(correlation.pending_flag("c1"))
    with mock.patch("incidents.tasks.correlate_key.apply_async") as apply_async:
        yield apply_async
    cache.delete(correlation.pending_flag("c1"))


def test_the_flag_is_taken_after_commit_and_one_run_is_queued(queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            correlation.correlation_enqueue(["c1", "c1"])
            assert cache.get(correlation.pending_flag("c1")) is None  # a run starting now leaves room for the next
            queued.assert_not_called()
    queued.assert_called_once_with(("c1",), queue="rootline-correlation")
    assert cache.get(correlation.pending_flag("c1")) == 1
    with django_capture_on_commit_callbacks(execute=True):
        correlation.correlation_enqueue(["c1"])  # already pending: nothing more
    queued.assert_called_once()


def test_a_rolled_back_transaction_leaves_no_flag_and_queues_nothing(queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError):
            with transaction.atomic():
                correlation.correlation_enqueue(["c1"])
                raise RuntimeError("the batch failed")
    queued.assert_not_called()
    assert cache.get(correlation.pending_flag("c1")) is None


def test_with_shards_a_key_always_goes_to_the_same_queue_and_keys_spread(queued, settings, django_capture_on_commit_callbacks):
    settings.CORRELATION_SHARDS = 3
    keys = [f"cluster-{n}" for n in range(30)]
    for key in keys:
        cache.delete(correlation.pending_flag(key))
    with django_capture_on_commit_callbacks(execute=True):
        correlation.correlation_enqueue(keys)
    queues = {call.args[0][0]: call.kwargs["queue"] for call in queued.call_args_list}
    assert set(queues) == set(keys)
    assert set(queues.values()) == {"rootline-correlation-0", "rootline-correlation-1", "rootline-correlation-2"}
    assert all(correlation.correlation_queue(key) == queue for key, queue in queues.items())
    for key in keys:
        cache.delete(correlation.pending_flag(key))
