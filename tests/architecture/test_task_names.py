"""Celery task names are part of the interface: messages already queued, beat's schedule and a
worker of the previous release name tasks by them. Renaming one is a deliberate change here."""

from __future__ import annotations

from celery import current_app
from django.conf import settings

from incidents import flow

PINNED = {
    "incidents.review_freeze",
    "incidents.review_digest",
    "incidents.process_delivery",
    "incidents.process_pending_deliveries",
    "incidents.requeue_stale_deliveries",
    "incidents.requeue_uncorrelated",
    "incidents.requeue_evidence",
    "incidents.apply_pending_actions",
    "incidents.correlate_key",
    "incidents.collect_evidence",
    "incidents.collect_evidence_each",
    "incidents.draft_postmortems",
    "incidents.remediation_check",
    "incidents.remediation_remind",
    "incidents.remediation_webhook",
    "incidents.prune",
}


def project_tasks() -> set[str]:
    return {name for name in current_app.tasks if not name.startswith("celery.")}


def test_every_task_of_the_project_has_its_pinned_name():
    assert project_tasks() == PINNED


def test_what_flow_sends_and_beat_runs_are_registered_tasks():
    sent = {
        value
        for name, value in vars(flow).items()
        if name.isupper() and isinstance(value, str) and value.startswith("incidents.")
    }
    assert sent and sent <= project_tasks()
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert scheduled and scheduled <= project_tasks()
