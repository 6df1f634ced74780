"""Rootline's writes. Views, tasks, admin actions and management commands all call these.

Ingestion has two halves: `delivery_receive` runs inside the webhook request (parse to answer
the sender precisely, store the raw body, enqueue), and `delivery_process` runs in a worker
(upsert the alerts). Both are idempotent: Alertmanager delivers at least once, re-sends groups
when they change and every repeat_interval, and retries 5xx.
"""
from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.db import DatabaseError, IntegrityError, connections, router, transaction
from django.db.models import F
from django.utils import timezone
from rest_framework.authtoken.models import Token

from incidents.correlation import correlation_enqueue, correlation_key_of
from incidents.ingest import ParsedAlert, PayloadError, parser_for
from incidents.models import Alert, Delivery, Integration, token_digest

logger = logging.getLogger(__name__)

ROLES = ("viewer", "responder", "author", "admin")
REDACTED_HEADERS = {"authorization", "cookie", "proxy-authorization", "x-api-key"}
UPSERT_BATCH = 1000
# Draining (see `deliveries_drain`): deliveries per transaction, how long one task drains before it
# hands over to a fresh task, and how many failed batch attempts leave a delivery to the
# one-by-one path (beat's requeue and `process_delivery` with its backoff).
DRAIN_BATCH = 500
DRAIN_MAX_SECONDS = 20.0
DRAIN_MAX_ATTEMPTS = 3
DRAIN_FLAG = "rootline:drain-pending"
DRAIN_FLAG_TTL = 30


class RootlineError(Exception):
    """A request the domain refuses; the message is meant for the person who made it."""


@dataclass(frozen=True)
class Receipt:
    """What the webhook answers: the contract's 202 or 400 body, tied to the stored delivery."""

    status_code: int
    body: dict
    retry_after: int | None = None


# Integrations and tokens -------------------------------------------------------------------


def integration_add(*, kind: str, name: str, token: str | None = None, rate_limit: float | None = None) -> tuple[Integration, str]:
    if kind not in Integration.Kind.values:
        raise RootlineError(f"unknown kind {kind!r}; expected one of {', '.join(Integration.Kind.values)}")
    if not name.strip():
        raise RootlineError("an integration needs a name")
    if rate_limit is not None and rate_limit <= 0:
        raise RootlineError("--rate-limit must be a positive number of alerts per second")
    if Integration.objects.filter(name=name).exists():
        raise RootlineError(f"an integration named {name!r} exists already")
    token = token or secrets.token_urlsafe(32)
    try:
        integration = Integration.objects.create(kind=kind, name=name, token_digest=token_digest(token), rate_limit=rate_limit)
    except IntegrityError:
        raise RootlineError("that token is in use by another integration; choose another") from None
    return integration, token


def integration_authenticate(*, integration_id: int, kind: str, token: str) -> Integration | None:
    if not token:
        return None
    integration = integration_active(integration_id, kind)
    if integration is None or not integration.token_matches(token):
        return None
    return integration


def integration_active(integration_id: int, kind: str) -> Integration | None:
    """The webhook's per-request lookup in plain SQL: compiling the ORM query cost three times
    the query itself (0.41 against 0.10 ms of CPU per request on the bench machine). Only the
    columns a webhook needs are read; the others load on access, as with `.only()`."""
    alias = router.db_for_read(Integration)
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(integration_active_sql(connection), [integration_id, kind])
        row = cursor.fetchone()
    return None if row is None else Integration.from_db(alias, integration_webhook_fields(), list(row))


INTEGRATION_WEBHOOK_FIELDS = {"id", "kind", "name", "token_digest", "rate_limit"}


def integration_webhook_fields() -> list[str]:
    return [field.attname for field in Integration._meta.concrete_fields if field.attname in INTEGRATION_WEBHOOK_FIELDS]


def integration_active_sql(connection) -> str:
    meta = Integration._meta
    quote = connection.ops.quote_name
    return "SELECT {} FROM {} WHERE {} = %s AND {} = %s AND {}".format(
        ", ".join(quote(meta.get_field(name).column) for name in integration_webhook_fields()),
        quote(meta.db_table), quote(meta.pk.column), quote(meta.get_field("kind").column),
        quote(meta.get_field("is_active").column),
    )


def roles_ensure() -> None:
    for role in ROLES:
        Group.objects.get_or_create(name=role)


def api_token_issue(*, username: str, create_user: bool = False) -> str:
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    if user is None:
        if not create_user:
            raise RootlineError(f"no user {username!r}; pass --create-user to create a responder")
        user = User.objects.create_user(username=username)
        roles_ensure()
        user.groups.add(Group.objects.get(name="responder"))
    token, _ = Token.objects.get_or_create(user=user)
    return token.key


# Deliveries --------------------------------------------------------------------------------


def safe_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers worth keeping for replay and debugging; credentials never reach the database."""
    kept = {}
    for name, value in headers:
        lower = name.lower()
        kept[lower] = "[redacted]" if lower in REDACTED_HEADERS else value[:1024]
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
    delivery = Delivery(integration=integration, received_at=received_at, body=body, body_digest=digest, size=len(body), headers=headers)
    try:
        result = parser_for(integration.kind)(body, received_at)
    except PayloadError as exc:
        delivery.status = Delivery.Status.REJECTED
        delivery.error = exc.message
        delivery.rejected = [rejection.as_dict() for rejection in exc.rejected[:1000]]
    else:
        delivery.accepted = len(result.alerts)
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
        delivery_enqueue(delivery.pk)
    return receipt_for(delivery)


def delivery_insert(delivery: Delivery) -> bool:
    """INSERT ... ON CONFLICT DO NOTHING RETURNING id: stores the body and tells a body seen
    before in one statement (the unique constraint `delivery_body_once` decides), where
    `save()` needed a look-up first and a savepoint. False: nothing stored, a body seen before."""
    alias = router.db_for_write(Delivery)
    connection = connections[alias]
    meta = Delivery._meta
    fields = [field for field in meta.concrete_fields if not field.primary_key]
    quote = connection.ops.quote_name
    sql = "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING RETURNING {}".format(
        quote(meta.db_table), ", ".join(quote(field.column) for field in fields),
        ", ".join(["%s"] * len(fields)), quote(meta.pk.column),
    )
    params = [field.get_db_prep_save(field.pre_save(delivery, True), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return False
    delivery.pk = row[0]
    delivery._state.adding = False
    delivery._state.db = alias
    return True


def delivery_enqueue(delivery_id: int) -> None:
    """After the commit, get the delivery processed. With a shared cache (Redis) and a real
    broker, a storm of deliveries shares a few drain tasks (`deliveries_drain`) instead of one
    task per delivery; otherwise (eager Celery, the demo) one `process_delivery` per delivery."""
    if settings.ROOTLINE_INGEST_DRAIN and not settings.CELERY_TASK_ALWAYS_EAGER:
        transaction.on_commit(drain_signal)
    else:
        from incidents.tasks import process_delivery

        process_delivery.delay_on_commit(delivery_id)


def drain_signal() -> None:
    """Enqueue a drain task unless one is queued and not yet started: the flag is set here and
    cleared by the task as it starts, before it looks for pending deliveries, so a delivery
    committed before this call is either seen by that task or signals a new one. A lost
    message or a dead cache delays nothing beyond the flag's TTL and beat's requeue."""
    from incidents.tasks import process_pending_deliveries

    try:
        first = cache.add(DRAIN_FLAG, 1, timeout=DRAIN_FLAG_TTL)
    except Exception:  # noqa: BLE001 - no cache: enqueue anyway, a spare drain costs one query
        logger.warning("drain flag unavailable; enqueueing a drain", exc_info=True)
        first = True
    if first:
        process_pending_deliveries.delay()


def delivery_with_digest(integration: Integration, digest: str) -> Delivery | None:
    return (
        Delivery.objects.filter(integration=integration, body_digest=digest)
        .only("id", "status", "accepted", "rejected", "error")
        .first()
    )


def throttled(integration: Integration, delivery: Delivery) -> Receipt:
    message = f"over this integration's rate limit of {integration.rate_limit:g} alerts/s; retry later"
    refused = delivery_record_refusal(
        integration=integration, status=Delivery.Status.THROTTLED, size=delivery.size, headers=delivery.headers, error=message
    )
    status = 429 if integration.kind == Integration.Kind.EVENTS else 503
    return Receipt(status, {"error": message, "delivery": refused.pk}, retry_after=1)


def receipt_for(delivery: Delivery) -> Receipt:
    if delivery.status == Delivery.Status.REJECTED:
        body = {"error": delivery.error, "delivery": delivery.pk}
        if delivery.rejected:
            body["rejected"] = delivery.rejected
        return Receipt(400, body)
    return Receipt(202, {"accepted": delivery.accepted, "rejected": delivery.rejected, "delivery": delivery.pk})


def delivery_record_refusal(*, integration: Integration, status: str, size: int, headers: dict[str, str], error: str) -> Delivery:
    """A body we did not keep (too large, over the rate limit): its size and headers are kept."""
    return Delivery.objects.create(
        integration=integration, received_at=timezone.now(), status=status, size=size, headers=headers, error=error
    )


def delivery_process(*, delivery_id: int) -> None:
    """Upsert the delivery's alerts. Safe to run twice: the row lock and the status re-check
    make a second run return at once, and upserts are keyed by (fingerprint, startsAt).
    The lock is on the delivery row only (`of=("self",)`): locking its integration too, as a
    plain select_for_update with select_related does, serialised every worker on it."""
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update(of=("self",)).select_related("integration").filter(pk=delivery_id).first()
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


def pending_deliveries(limit: int):
    return (
        Delivery.objects.filter(status=Delivery.Status.PENDING, attempts__lt=DRAIN_MAX_ATTEMPTS).order_by("id")[:limit]
    )


def deliveries_process_pending(*, limit: int = DRAIN_BATCH) -> int:
    with transaction.atomic():
        deliveries = list(
            pending_deliveries(limit).select_for_update(skip_locked=True, of=("self",)).select_related("integration")
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
    correlation_enqueue(keys)


def deliveries_save_outcome(deliveries: list[Delivery]) -> None:
    """One UPDATE per distinct outcome (in a storm: one for the whole batch), where bulk_update
    built a CASE per row and field (0.3 ms of CPU per delivery)."""
    fields = ("status", "accepted", "rejected", "processed_at", "attempts", "error")
    groups: dict[str, tuple[dict, list[int]]] = {}
    for delivery in deliveries:
        values = {name: getattr(delivery, name) for name in fields}
        key = repr(sorted(values.items()))
        groups.setdefault(key, (values, []))[1].append(delivery.pk)
    for values, ids in groups.values():
        Delivery.objects.filter(pk__in=ids).update(**values)


class OccurrenceRounds:
    """Alert rows of several deliveries, grouped so that one statement never holds an
    occurrence twice (see `deliveries_process`)."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.rounds: list[tuple[list[Alert], list[Alert]]] = []
        self.seen: dict[tuple[str, datetime], int] = {}

    def add(self, delivery: Delivery, firing: list[ParsedAlert], resolved: list[ParsedAlert]) -> None:
        for alerts, index in ((firing, 0), (resolved, 1)):
            for alert in alerts:
                key = (alert.fingerprint, alert.starts_at)
                number = self.seen.get(key, 0)
                self.seen[key] = number + 1
                if number == len(self.rounds):
                    self.rounds.append(([], []))
                self.rounds[number][index].append(alert_row(delivery.integration, delivery, alert, self.now))

    def flush(self) -> None:
        for firing, resolved in self.rounds:
            upsert_rows(firing, update_fields=FIRING_UPDATE_FIELDS)
            upsert_rows(resolved, update_fields=RESOLVED_UPDATE_FIELDS)
        self.rounds, self.seen = [], {}


def delivery_replay(*, delivery_id: int) -> Delivery:
    """Process a stored body again, e.g. a rejected one after a parser fix."""
    delivery = Delivery.objects.filter(pk=delivery_id).first()
    if delivery is None:
        raise RootlineError(f"no delivery {delivery_id}")
    if delivery.status in (Delivery.Status.TOO_LARGE, Delivery.Status.THROTTLED):
        raise RootlineError(f"delivery {delivery_id} has no stored body ({delivery.status}); the sender must send it again")
    Delivery.objects.filter(pk=delivery_id).update(status=Delivery.Status.PENDING, error="")
    delivery_process(delivery_id=delivery_id)
    delivery.refresh_from_db()
    return delivery


def stale_delivery_ids(*, older_than: timedelta = timedelta(minutes=2), limit: int = 1000) -> list[int]:
    cutoff = timezone.now() - older_than
    return list(
        Delivery.objects.filter(status__in=[Delivery.Status.PENDING, Delivery.Status.FAILED], received_at__lt=cutoff)
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )


# Alerts ------------------------------------------------------------------------------------


def alerts_upsert(*, integration: Integration, delivery: Delivery, parsed: list[ParsedAlert]) -> None:
    firing, resolved, events = split_by_handling(parsed)
    now = timezone.now()
    upsert_occurrences(integration, delivery, firing, now, update_fields=FIRING_UPDATE_FIELDS)
    upsert_occurrences(integration, delivery, resolved, now, update_fields=RESOLVED_UPDATE_FIELDS)
    for event in events:
        event_apply(integration=integration, delivery=delivery, event=event, now=now)


# A firing view never overwrites status or ends_at (see `upsert_occurrences`).
FIRING_UPDATE_FIELDS = ["labels", "annotations", "alertname", "generator_url"]
RESOLVED_UPDATE_FIELDS = ["labels", "annotations", "alertname", "generator_url", "status", "ends_at", "correlated"]


def split_by_handling(parsed: list[ParsedAlert]) -> tuple[list[ParsedAlert], list[ParsedAlert], list[ParsedAlert]]:
    """Alertmanager-style alerts are keyed by (fingerprint, startsAt); within one body the
    resolved view of an occurrence wins. Events API events depend on what is already firing."""
    latest: dict[tuple[str, datetime], ParsedAlert] = {}
    events = []
    for alert in parsed:
        if alert.event_action and alert.kind != "change":
            events.append(alert)
            continue
        key = (alert.fingerprint, alert.starts_at)
        if key not in latest or alert.status == "resolved":
            latest[key] = alert
    firing = [alert for alert in latest.values() if alert.status == "firing"]
    resolved = [alert for alert in latest.values() if alert.status == "resolved"]
    return firing, resolved, events


def alert_row(integration: Integration, delivery: Delivery, alert: ParsedAlert, now: datetime) -> Alert:
    change = alert.kind == Alert.Kind.CHANGE
    return Alert(
        fingerprint=alert.fingerprint,
        starts_at=alert.starts_at,
        ends_at=alert.ends_at,
        status=alert.status,
        kind=alert.kind,
        alertname=alert.alertname[:255],
        labels=alert.labels,
        annotations=alert.annotations,
        generator_url=alert.generator_url,
        integration=integration,
        first_delivery=delivery,
        received_at=now,
        correlation_key=correlation_key_of(alert.labels),
        layer="process" if change else None,
        failure_mode="change" if change else None,
    )


def upsert_occurrences(integration: Integration, delivery: Delivery, alerts: list[ParsedAlert], now: datetime, *, update_fields: list[str]) -> None:
    """One INSERT ... ON CONFLICT per batch. A firing view never overwrites status or ends_at,
    so a late or re-sent firing notification cannot reopen a resolved occurrence."""
    upsert_rows([alert_row(integration, delivery, alert, now) for alert in alerts], update_fields=update_fields)


def upsert_rows(rows: list[Alert], *, update_fields: list[str]) -> None:
    # Key order: concurrent drains upserting overlapping occurrences lock rows in the same order.
    rows = sorted(rows, key=lambda row: (row.fingerprint, row.starts_at))
    for start in range(0, len(rows), UPSERT_BATCH):
        Alert.objects.bulk_create(
            rows[start : start + UPSERT_BATCH],
            update_conflicts=True,
            unique_fields=["fingerprint", "starts_at"],
            update_fields=update_fields,
        )


def event_apply(*, integration: Integration, delivery: Delivery, event: ParsedAlert, now: datetime) -> None:
    """PagerDuty semantics: a trigger for a key already firing updates that occurrence; a
    trigger after its resolve opens a new one; resolve and acknowledge need an open one."""
    current = Alert.objects.select_for_update().filter(fingerprint=event.fingerprint, status=Alert.Status.FIRING).order_by("-starts_at").first()
    if event.event_action == "trigger":
        if current is not None:
            current.labels, current.annotations = event.labels, event.annotations
            current.alertname = event.alertname[:255]
            current.save(update_fields=["labels", "annotations", "alertname"])
            return
        if Alert.objects.filter(fingerprint=event.fingerprint, starts_at=event.starts_at).exists():
            return  # the same trigger again, after its resolve: a replay, not a new occurrence
        alert_row(integration, delivery, event, now).save()
    elif event.event_action == "resolve" and current is not None:
        current.status = Alert.Status.RESOLVED
        current.ends_at = max(event.ends_at or event.starts_at, current.starts_at)
        current.correlated = False
        current.save(update_fields=["status", "ends_at", "correlated"])
