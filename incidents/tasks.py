"""Celery tasks: take ids, call one service, safe to run twice. Retries live here, not in services."""

from __future__ import annotations

import logging

import requests
from celery import shared_task
from django.core.cache import cache
from django.db import DatabaseError
from django.utils import timezone

from incidents import flow, replay, services
from incidents.flow import evidence_collect_now
from incidents.models import AuditRecord, Incident
from incidents.review.weeks import Week
from incidents.services import correlation, remediation, retention, review
from incidents.services.evidence import evidence_collect
from incidents.services.postmortem_authoring import postmortems_refresh_for
from incidents.services.postmortems import postmortems_due_on_resolve
from incidents.services.remediation_webhook import WebhookRefused, remediation_webhook_send

logger = logging.getLogger(__name__)


@shared_task(
    name="incidents.process_delivery",
    autoretry_for=(DatabaseError,),
    retry_backoff=True,
    retry_backoff_max=120,
    max_retries=10,
    ignore_result=True,
)
def process_delivery(delivery_id: int) -> None:
    services.delivery_process(delivery_id=delivery_id)


@shared_task(
    name="incidents.process_pending_deliveries",
    autoretry_for=(DatabaseError,),
    retry_backoff=True,
    retry_backoff_max=120,
    max_retries=10,
    ignore_result=True,
)
def process_pending_deliveries() -> int:
    """Drain the pending deliveries in batches (enqueued by `services.deliveries.drain_signal`)."""
    return services.deliveries_drain()


@shared_task(name="incidents.requeue_stale_deliveries", ignore_result=True)
def requeue_stale_deliveries() -> int:
    """Deliveries stored while the broker was down, or whose worker died, are never lost."""
    ids = services.stale_delivery_ids()
    for delivery_id in ids:
        process_delivery.delay(delivery_id)
    return len(ids)


@shared_task(name="incidents.requeue_uncorrelated", ignore_result=True)
def requeue_uncorrelated() -> int:
    """Alerts stored but never correlated (their run's enqueue failed) are never left behind."""
    return len(flow.correlation_requeue_waiting())


@shared_task(name="incidents.requeue_evidence", ignore_result=True)
def requeue_evidence() -> int:
    """Incidents whose evidence collection died with its worker (or whose message was lost) get one."""
    return len(flow.evidence_requeue_owed())


@shared_task(name="incidents.apply_pending_actions", ignore_result=True)
def apply_pending_actions() -> dict[str, int]:
    """Imported actions whose alerts had not arrived yet, applied once those are stored and correlated."""
    return replay.pending_actions_apply()


@shared_task(
    name="incidents.correlate_key",
    autoretry_for=(DatabaseError,),
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=10,
    ignore_result=True,
)
def correlate_key(key: str, held_ranking: bool = False) -> None:
    """Correlate one cluster's new alerts; serialised per key by a lock inside the service. The
    worker process keeps the cluster's engine state for its next run (see ROOTLINE_CORRELATION_SHARDS).
    Queued while the key's last run was still going, it first waits the pace that run asked for
    (ROOTLINE_CORRELATION_PACE_MS): queued again for later, its flag still held. `held_ranking`:
    the run a previous one asked for to rank the big incidents it held back (it takes new alerts too)."""
    wait = flow.pace_wait(key)
    if wait:
        correlate_key.apply_async(
            (key,), {"held_ranking": held_ranking}, queue=flow.correlation_queue(key), countdown=wait
        )
        return
    if held_ranking:
        cache.delete(flow.ranking_flag(key))  # from now on, a run holding rankings back asks for another
    correlation.correlation_run(key=key, keep_state=True)


@shared_task(
    name="incidents.collect_evidence",
    autoretry_for=(DatabaseError,),
    retry_backoff=True,
    retry_backoff_max=120,
    max_retries=5,
    ignore_result=True,
)
def collect_evidence(incident_id: int, waited: int = 0) -> None:
    """Copy the series around an incident into its evidence; Prometheus trouble becomes a gap, not a retry.
    While its cluster's alerts wait for correlation, the collection waits too (`evidence_collect_now`;
    `waited`: seconds it has waited so far)."""
    if not Incident.objects.filter(pk=incident_id).exists():
        return
    if evidence_collect_now([incident_id], waited=waited):
        evidence_collect(incident_id=incident_id)
        # New evidence: an unpublished postmortem's facts are refreshed (a person's edited section
        # is marked stale, never overwritten); a resolved incident's is complete enough to draft.
        postmortems_refresh_for([incident_id])
        flow.postmortem_enqueue(postmortems_due_on_resolve([incident_id]))
        incident = Incident.objects.filter(pk=incident_id).first()
        if incident is not None:  # the same cascade back on the same deployment: its items hear of it
            remediation.remediation_note_recurrence(incident=incident)


@shared_task(name=flow.DRAFT_POSTMORTEMS, ignore_result=True)
def draft_postmortems(incident_ids: list[int]) -> None:
    """Draft the postmortem of each incident the policy asks one of and that has none yet."""
    for incident_id in postmortems_due_on_resolve(incident_ids):
        incident = Incident.objects.filter(pk=incident_id).first()
        if incident is not None:
            remediation.postmortem_draft_suggesting(incident=incident, user=None, via=AuditRecord.Via.SYSTEM)


@shared_task(name="incidents.collect_evidence_each", ignore_result=True)
def collect_evidence_each(incident_ids: list[int], waited: int = 0) -> None:
    """Queue a collection of each incident, on the evidence worker: a correlation run that opened
    or grew hundreds of incidents sends this one message instead of a task per incident
    (`evidence_enqueue_now`); each collection is still its own task, retried on its own. Those
    whose cluster's alerts wait for correlation go back in the queue together (`evidence_collect_now`)."""
    for incident_id in evidence_collect_now(list(incident_ids), waited=waited):
        collect_evidence.delay(incident_id)


@shared_task(name="incidents.remediation_check", ignore_result=True)
def remediation_check() -> None:
    """Done and verified items whose data after the fix covers their check's range, checked."""
    remediation.remediation_check_due()


@shared_task(name="incidents.remediation_remind", ignore_result=True)
def remediation_remind() -> None:
    """Owners of items due within 24 hours or overdue told, once per state change."""
    remediation.remediation_remind()


@shared_task(name="incidents.review_freeze", ignore_result=True)
def review_freeze() -> None:
    """The week that just closed, frozen once (a second run keeps the first freeze)."""
    review.review_freeze(week=Week.last_complete(timezone.now()))


@shared_task(name="incidents.review_digest", ignore_result=True)
def review_digest() -> None:
    """The closed week's digest mailed, once."""
    review.review_digest(week=Week.last_complete(timezone.now()), again=False)


@shared_task(name=flow.PRUNE, ignore_result=True)
def prune(
    batch: int = retention.BATCH,
    max_batches: int = retention.TASK_MAX_BATCHES,
    max_seconds: float = retention.TASK_MAX_SECONDS,
) -> dict[str, int | bool]:
    """Retention in bounded batches (beat, daily): what a run leaves, the next one goes on with."""
    report = retention.retention_prune(
        batch=batch, max_batches=max_batches, max_seconds=max_seconds, resume=True
    )
    for line in report.lines():
        logger.info("prune: %s", line)
    return {"bodies": report.bodies, "alerts": report.alerts, "finished": report.finished}


@shared_task(
    name=flow.REMEDIATION_WEBHOOK,
    autoretry_for=(requests.RequestException, WebhookRefused),
    retry_backoff=True,
    retry_backoff_max=600,
    max_retries=8,
    ignore_result=True,
)
def remediation_webhook(item_id: int, event: str) -> None:
    """POST the item as JSON to ROOTLINE_REMEDIATION_WEBHOOK_URL, signed (X-Rootline-Signature)."""
    remediation_webhook_send(item_id=item_id, event=event)
