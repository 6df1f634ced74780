"""A collection cut short (its worker killed, its message lost) is swept up by beat's
`incidents.requeue_evidence`; a person's "Refresh evidence" runs at once, whenever the last one was."""

from __future__ import annotations

import time
from datetime import timedelta
from unittest import mock

import pytest
from django.core.cache import cache
from django.utils import timezone

from incidents import flow
from incidents.models import Incident
from incidents.services.evidence import evidence_collect
from incidents.tasks import requeue_evidence

pytestmark = pytest.mark.django_db


@pytest.fixture
def broker(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.REQUEUE_AFTER_SECONDS = 120
    yield
    for pk in Incident.objects.values_list("pk", flat=True):
        cache.delete(flow.evidence_pending_flag(pk))
        cache.delete(flow.evidence_started_key(pk))


def incident(changed_ago: timedelta, collected_ago: timedelta | None = None, **fields) -> Incident:
    now = timezone.now()
    made = Incident.objects.create(title="sweep", started_at=now - timedelta(hours=1), **fields)
    Incident.objects.filter(pk=made.pk).update(
        updated_at=now - changed_ago,
        evidence_collected_at=now - collected_ago if collected_ago is not None else None,
    )
    cache.delete(flow.evidence_pending_flag(made.pk))
    cache.delete(flow.evidence_started_key(made.pk))
    return made


def test_the_sweep_asks_for_what_changed_since_its_last_finished_collection(broker):
    never = incident(timedelta(minutes=5))
    changed_since = incident(timedelta(minutes=5), collected_ago=timedelta(minutes=30))
    collected_after = incident(timedelta(minutes=30), collected_ago=timedelta(minutes=5))
    too_fresh = incident(timedelta(seconds=30))  # its own collection is still on the way
    too_old = incident(timedelta(days=3))
    merged = incident(timedelta(minutes=5), merged_into=never)
    pending = incident(timedelta(minutes=5))
    cache.set(flow.evidence_pending_flag(pending.pk), 1, timeout=60)

    with mock.patch("incidents.tasks.collect_evidence_each.apply_async") as each:
        assert requeue_evidence() == 3  # found in the database; the pending one keeps its own
    (queued,), _ = each.call_args
    assert sorted(queued[0]) == sorted([never.pk, changed_since.pk])
    assert not {collected_after.pk, too_fresh.pk, too_old.pk, merged.pk, pending.pk} & set(queued[0])


def test_a_collection_is_stamped_with_its_start_once_it_has_finished(broker):
    owed = incident(timedelta(minutes=5))
    before = timezone.now()
    evidence_collect(incident_id=owed.pk)  # no alerts: skipped, but finished
    owed.refresh_from_db()
    assert owed.evidence_collected_at is not None and before <= owed.evidence_collected_at <= timezone.now()
    with (
        mock.patch("incidents.tasks.collect_evidence.apply_async") as one,
        mock.patch("incidents.tasks.collect_evidence_each.apply_async") as each,
    ):
        requeue_evidence()
    one.assert_not_called()
    each.assert_not_called()


def test_a_person_asking_again_is_not_held_to_the_minimum_interval(
    broker, django_capture_on_commit_callbacks
):
    asked = incident(timedelta(minutes=5))
    cache.set(flow.evidence_started_key(asked.pk), time.time() - 5, timeout=60)
    with mock.patch("incidents.tasks.collect_evidence.apply_async") as enqueue:
        with django_capture_on_commit_callbacks(execute=True):
            flow.evidence_enqueue([asked.pk])
        assert enqueue.call_args.kwargs["countdown"] > flow.MIN_INTERVAL_SECONDS - 10
        cache.delete(flow.evidence_pending_flag(asked.pk))
        with django_capture_on_commit_callbacks(execute=True):
            flow.evidence_enqueue([asked.pk], asked=True)
        assert enqueue.call_args.kwargs["countdown"] == flow.ASKED_SECONDS
