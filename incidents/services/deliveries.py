"""Deliveries: what a webhook received, stored before it is answered, processed by workers.

Ingestion has two halves: `delivery_receive` runs inside the webhook request (parse to answer
the sender precisely, store the raw body, enqueue), and `delivery_process` / `deliveries_drain`
run in a worker (upsert the alerts). Both are idempotent: Alertmanager delivers at least once,
re-sends groups when they change and every repeat_interval, and retries 5xx.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from correlate.ingest import ParsedAlert, PayloadError, parser_for
from correlate.ingest.common import storable
from incidents.flow import DRAIN_FLAG, correlation_enqueue, delivery_enqueue, drain_signal
from incidents.models import Delivery, Integration
from incidents.services.alerts import View, alerts_upsert, split_by_handling, upsert_views
from incidents.services.correlation import correlation_key_of
from incidents.services.errors import CONFLICT, RootlineError, not_found
from incidents.services.tallies import (
    DELIVERIES_ACCEPTED,
    DELIVERIES_REJECTED,
    DELIVERY_ALERTS_ACCEPTED,
    DELIVERY_ALERTS_REJECTED,
    INGEST_DELAY,
    tally_add,
    tally_observe_many,
)
from incidents.sql import insert_unless_conflict
from rootline.gc_pause import gc_paused

logger = logging.getLogger(__name__)

REDACTED_HEADERS = {"authorization", "cookie", "proxy-authorization", "x-api-key"}
# Draining (see `deliveries_drain`): deliveries per transaction, how long one task drains before it
# hands over to a fresh task, and how many failed batch attempts leave a delivery to the
# one-by-one path (beat's requeue and `process_delivery` with its backoff).
DRAIN_BATCH = 500
DRAIN_MAX_SECONDS = 20.0
DRAIN_MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class Receipt:
    """What the webhook answers: the contract's 202 or 400 body, tied to the stored delivery, or
    that the body was over the rate limit (`throttled`: the webhook view says how, by sender)."""

    status_code: int
    body: dict
    retry_after: int | None = None
    throttled: bool = False


def safe_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers worth keeping for replay and debugging; credentials never reach the database.
    A character PostgreSQL cannot store (NUL, a lone surrogate) becomes U+FFFD, so that an odd
    header never costs the delivery its body."""
    kept = {}
    for name, value in headers:
        lower = storable(name.lower()[:256])
        kept[lower] = "[redacted]" if lower in REDACTED_HEADERS else storable(value[:1024])
    return kept


def delivery_receive(
    *,
    integration: Integration,
    body: bytes,
    headers: dict[str, str],
    received_at: datetime | None = None,
    admit: Callable[[int], bool] | None = None,
) -> Receipt:
    """Store the body durably, then answer; a body seen before answers as it did, storing nothing.

    `admit(n)` is the integration's rate limit: over it, the body is not kept (only its size and
    headers) and the sender is told when to retry: 503 for Alertmanager and Grafana, which
    retry only 5xx, and 429 for Events API senders, which back off on it."""
    received_at = received_at or timezone.now()
    digest = hashlib.sha256(body).hexdigest()
    if admit is not None:
        # Over the rate limit too, a body seen before answers as it did: look it up first.
        earlier = delivery_with_digest(integration, digest)
        if earlier is not None:
            return receipt_for(earlier)
    delivery = Delivery(
        integration=integration,
        received_at=received_at,
        body=body,
        body_digest=digest,
        size=len(body),
        headers=headers,
    )
    try:
        result = parser_for(integration.kind)(body, received_at)
    except PayloadError as exc:
        delivery.status = Delivery.Status.REJECTED
        delivery.error = exc.message
        delivery.rejected = [rejection.as_dict() for rejection in exc.rejected[:1000]]
    else:
        delivery.accepted = len(result.alerts)
        delivery.truncated_alerts = result.truncated
        delivery.rejected = [rejection.as_dict() for rejection in result.rejected[:1000]]
        if not result.alerts:
            delivery.status = Delivery.Status.PROCESSED
            delivery.processed_at = received_at
        elif admit is not None and not admit(len(result.alerts)):
            return throttled(integration, delivery)
    if not delivery_insert(delivery):
        # The same body again (a retry, an HA peer, or both at once): answer as the first time.
        earlier = delivery_with_digest(integration, digest)
        if earlier is None:
            raise IntegrityError("delivery_body_once conflict without an earlier delivery")
        return receipt_for(earlier)
    if delivery.status == Delivery.Status.PENDING:
        delivery_enqueue(delivery.pk)  # counted by the worker that reads it
    else:
        deliveries_count([delivery])  # refused, or nothing to read: no worker will see it
    return receipt_for(delivery)


def delivery_insert(delivery: Delivery) -> bool:
    """Store the body, telling a body seen before in the same statement (the unique constraint
    `delivery_body_once` decides), where `save()` needed a look-up first and a savepoint. False:
    nothing stored, a body seen before."""
    return insert_unless_conflict(delivery, binary="body")


def delivery_with_digest(integration: Integration, digest: str) -> Delivery | None:
    return (
        Delivery.objects.filter(integration=integration, body_digest=digest)
        .only("id", "status", "accepted", "rejected", "error")
        .first()
    )


def throttled(integration: Integration, delivery: Delivery) -> Receipt:
    message = f"over this integration's rate limit of {integration.rate_limit:g} alerts/s; retry later"
    refused = delivery_record_refusal(
        integration=integration,
        status=Delivery.Status.THROTTLED,
        size=delivery.size,
        headers=delivery.headers,
        error=message,
    )
    return Receipt(429, {"error": message, "delivery": refused.pk}, retry_after=1, throttled=True)


def receipt_for(delivery: Delivery) -> Receipt:
    if delivery.status == Delivery.Status.REJECTED:
        body = {"error": delivery.error, "delivery": delivery.pk}
        if delivery.rejected:
            body["rejected"] = delivery.rejected
        return Receipt(400, body)
    return Receipt(
        202, {"accepted": delivery.accepted, "rejected": delivery.rejected, "delivery": delivery.pk}
    )


def delivery_record_refusal(
    *, integration: Integration, status: str, size: int, headers: dict[str, str], error: str
) -> Delivery:
    """A body we did not keep (too large, over the rate limit): its size and headers are kept."""
    refused = Delivery.objects.create(
        integration=integration,
        received_at=timezone.now(),
        status=status,
        size=size,
        headers=headers,
        error=error,
    )
    tally_add(DELIVERIES_REJECTED, reason=status)  # the status is the reason: too_large, throttled
    return refused


def delivery_count_unstored(*, reason: str) -> None:
    """A webhook refused before anything was stored (a wrong token, a value the database refuses)."""
    tally_add(DELIVERIES_REJECTED, reason=reason)


def deliveries_count(deliveries: list[Delivery], *, read_at: datetime | None = None) -> None:
    """Rootline's own figures for deliveries read: accepted or rejected, with the alerts in them
    read or not (up to 1,000 a body, as stored); `read_at`, a worker's read: how long each waited."""
    accepted = [d for d in deliveries if d.status == Delivery.Status.PROCESSED]
    rejected = sum(d.status == Delivery.Status.REJECTED for d in deliveries)
    if accepted:
        tally_add(DELIVERIES_ACCEPTED, len(accepted))
        tally_add(DELIVERY_ALERTS_ACCEPTED, sum(d.accepted for d in accepted))
    if rejected:
        tally_add(DELIVERIES_REJECTED, rejected, reason="unreadable")
    unread = sum(len(d.rejected) for d in deliveries)
    if unread:
        tally_add(DELIVERY_ALERTS_REJECTED, unread)
    if read_at is not None and accepted:
        waited = sum((read_at - d.received_at).total_seconds() for d in accepted)
        tally_observe_many(INGEST_DELAY, max(0.0, waited), len(accepted))


def delivery_process(*, delivery_id: int) -> None:
    """Upsert the delivery's alerts. Safe to run twice: the row lock and the status re-check
    make a second run return at once, and upserts are keyed by (fingerprint, startsAt).
    The lock is on the delivery row only (`of=("self",)`): locking its integration too, as a
    plain select_for_update with select_related does, serialised every worker on it."""
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(of=("self",))
            .select_related("integration")
            .filter(pk=delivery_id)
            .first()
        )
        if delivery is None or delivery.status not in (Delivery.Status.PENDING, Delivery.Status.FAILED):
            return
        deliveries_process([delivery])


def deliveries_drain(*, limit: int = DRAIN_BATCH, max_seconds: float = DRAIN_MAX_SECONDS) -> int:
    """Process pending deliveries, `limit` per transaction, until none is left (or `max_seconds`
    pass: then a fresh task takes over, so other tasks get a turn). Several drains run side by
    side: each takes rows the others have not locked (SKIP LOCKED). If a batch fails, its
    deliveries are tried one by one, so one bad delivery cannot hold up the others."""
    try:
        cache.delete(DRAIN_FLAG)  # from now on, a new delivery signals a new drain
    except Exception:  # noqa: BLE001
        logger.warning("drain flag unavailable", exc_info=True)
    deadline = timezone.now() + timedelta(seconds=max_seconds)
    total = 0
    while True:
        try:
            count = deliveries_process_pending(limit=limit)
        except DatabaseError:
            logger.warning("a batch of deliveries failed; processing them one by one", exc_info=True)
            count = deliveries_process_one_by_one(limit=limit)
        total += count
        if count < limit:
            return total
        if timezone.now() > deadline:
            drain_signal()
            return total


def pending_deliveries(limit: int) -> QuerySet[Delivery]:
    return Delivery.objects.filter(status=Delivery.Status.PENDING, attempts__lt=DRAIN_MAX_ATTEMPTS).order_by(
        "id"
    )[:limit]


def deliveries_process_pending(*, limit: int = DRAIN_BATCH) -> int:
    with transaction.atomic(), gc_paused():
        deliveries = list(
            pending_deliveries(limit)
            .select_for_update(skip_locked=True, of=("self",))
            .select_related("integration")
        )
        if deliveries:
            deliveries_process(deliveries)
    return len(deliveries)


def deliveries_process_one_by_one(*, limit: int = DRAIN_BATCH) -> int:
    ids = list(pending_deliveries(limit).values_list("id", flat=True))
    for delivery_id in ids:
        try:
            delivery_process(delivery_id=delivery_id)
        except DatabaseError as exc:
            logger.warning("delivery %s failed", delivery_id, exc_info=True)
            Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.PENDING).update(
                attempts=F("attempts") + 1, error=f"{exc.__class__.__name__}: {exc}"[:2000]
            )
    return len(ids)


def deliveries_process(deliveries: list[Delivery]) -> None:
    """Upsert the alerts of locked deliveries, inside the caller's transaction: the same rows as
    processing them one by one in this order, in far fewer statements. Alerts of different
    deliveries share one INSERT ... ON CONFLICT per round; the k-th view of an occurrence in
    the batch goes to round k, so views of one occurrence are applied in delivery order (one
    statement cannot touch a row twice). A delivery with Events API events is applied alone,
    in its place in the order."""
    now = timezone.now()
    rounds = OccurrenceRounds(now)
    keys: set[str] = set()
    for delivery in deliveries:
        delivery.attempts += 1
        try:
            result = parser_for(delivery.integration.kind)(bytes(delivery.body), delivery.received_at)
        except PayloadError as exc:
            delivery.status = Delivery.Status.REJECTED
            delivery.error = exc.message
            continue
        firing, resolved, events = split_by_handling(result.alerts)
        if events:
            rounds.flush()
            alerts_upsert(integration=delivery.integration, delivery=delivery, parsed=result.alerts)
        else:
            rounds.add(delivery, firing, resolved)
        keys.update(correlation_key_of(alert.labels) for alert in result.alerts)
        delivery.status = Delivery.Status.PROCESSED
        delivery.accepted = len(result.alerts)
        delivery.rejected = [rejection.as_dict() for rejection in result.rejected[:1000]]
        delivery.processed_at = now
        delivery.error = ""
    rounds.flush()
    deliveries_save_outcome(deliveries)
    deliveries_count(deliveries, read_at=now)  # counted once the batch commits
    correlation_enqueue(keys)


def deliveries_save_outcome(deliveries: list[Delivery]) -> None:
    """One UPDATE per distinct outcome (in a storm: one for the whole batch), where bulk_update
    built a CASE per row and field, CPU paid for every delivery."""
    fields = ("status", "accepted", "rejected", "processed_at", "attempts", "error")
    groups: dict[str, tuple[dict, list[int]]] = {}
    for delivery in deliveries:
        values = {name: getattr(delivery, name) for name in fields}
        key = repr(sorted(values.items()))
        groups.setdefault(key, (values, []))[1].append(delivery.pk)
    for values, ids in groups.values():
        Delivery.objects.filter(pk__in=ids).update(**values)


class OccurrenceRounds:
    """Views of alerts of several deliveries, grouped so that one statement never holds an
    occurrence twice (see `deliveries_process`), upserted by `alerts.upsert_views`."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.rounds: list[tuple[list[View], list[View]]] = []
        self.seen: dict[tuple[str, datetime], int] = {}

    def add(self, delivery: Delivery, firing: list[ParsedAlert], resolved: list[ParsedAlert]) -> None:
        integration = delivery.integration
        for alerts, index in ((firing, 0), (resolved, 1)):
            for alert in alerts:
                key = (alert.fingerprint, alert.starts_at)
                number = self.seen.get(key, 0)
                self.seen[key] = number + 1
                if number == len(self.rounds):
                    self.rounds.append(([], []))
                self.rounds[number][index].append((integration, delivery, alert))

    def flush(self) -> None:
        if self.rounds:
            upsert_views(self.rounds, self.now)
        self.rounds, self.seen = [], {}


def delivery_replay(*, delivery_id: int) -> Delivery:
    """Process a stored body again, e.g. a rejected one after a parser fix. A body retention
    emptied is refused, as one never kept is (the check and the status change are one statement,
    so a prune between them cannot leave an empty body to process)."""
    delivery = Delivery.objects.filter(pk=delivery_id).first()
    if delivery is None:
        raise not_found(f"no delivery {delivery_id}")
    if delivery.status in (Delivery.Status.TOO_LARGE, Delivery.Status.THROTTLED):
        raise RootlineError(
            f"delivery {delivery_id} has no stored body ({delivery.status}); the sender must send it again",
            code=CONFLICT,
        )
    if not Delivery.objects.filter(pk=delivery_id, body_pruned_at__isnull=True).update(
        status=Delivery.Status.PENDING, error=""
    ):
        raise body_pruned(Delivery.objects.get(pk=delivery_id))
    delivery_process(delivery_id=delivery_id)
    delivery.refresh_from_db()
    return delivery


def body_pruned(delivery: Delivery) -> RootlineError:
    pruned = delivery.body_pruned_at
    when = f" on {pruned:%Y-%m-%d} (UTC)" if pruned else ""
    return RootlineError(
        f"delivery {delivery.pk}'s body was pruned by retention{when} (ROOTLINE_RETAIN_BODIES_DAYS): "
        "nothing is left to replay; the sender must send it again",
        code=CONFLICT,
    )


def stale_delivery_ids(*, older_than: timedelta | None = None, limit: int = 1000) -> list[int]:
    """Deliveries pending or failed for longer than `older_than` (ROOTLINE_REQUEUE_AFTER_SECONDS)."""
    cutoff = timezone.now() - (older_than or timedelta(seconds=settings.REQUEUE_AFTER_SECONDS))
    return list(
        Delivery.objects.filter(
            status__in=[Delivery.Status.PENDING, Delivery.Status.FAILED], received_at__lt=cutoff
        )
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )
