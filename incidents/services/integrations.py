"""Integrations: who may send alerts, with which token."""

from __future__ import annotations

import hmac
import math
import secrets
import threading
import time
from typing import Generic, TypeVar

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import IntegrityError, connections, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.signals import post_delete, post_save

from incidents.models import AuditRecord, Integration, storable_id, token_digest
from incidents.services.audit import audit_record
from incidents.services.errors import RootlineError
from incidents.services.roles import ROLES
from incidents.sql import concrete_field

K = TypeVar("K")
V = TypeVar("V")
NAME_MAX: int = concrete_field(Integration, "name").max_length or 200


def integration_add(
    *, kind: str, name: str, token: str | None = None, rate_limit: float | None = None
) -> tuple[Integration, str]:
    if kind not in Integration.Kind.values:
        raise RootlineError(f"unknown kind {kind!r}; expected one of {', '.join(Integration.Kind.values)}")
    if not name.strip():
        raise RootlineError("an integration needs a name")
    if len(name) > NAME_MAX or not name.isprintable():
        raise RootlineError(f"--name: at most {NAME_MAX} printable characters")
    if token and (not token.strip() or not token.isprintable()):
        raise RootlineError("--token: printable characters only (it goes into an Authorization header)")
    if rate_limit is not None and not 0 < rate_limit < math.inf:  # NaN too
        raise RootlineError("--rate-limit must be a positive number of alerts per second")
    if Integration.objects.filter(name=name).exists():
        raise RootlineError(f"an integration named {name!r} exists already")
    token = token or secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            integration = Integration.objects.create(
                kind=kind, name=name, token_digest=token_digest(token), rate_limit=rate_limit
            )
            audit_record(
                by=None,
                via=AuditRecord.Via.SYSTEM,
                target=integration,
                action="integration_add",
                field="token",
                old=None,
                new="issued",
                detail={"kind": kind, "name": name, "rate_limit": rate_limit},
            )
    except IntegrityError:
        raise RootlineError("that token is in use by another integration; choose another") from None
    return integration, token


def integration_rotate(*, integration_id: int) -> tuple[Integration, str]:
    """Give the integration a new generated token (returned, printed once) in place of its old one,
    which every web process refuses within ROOTLINE_INTEGRATION_CACHE_SECONDS (`IntegrationCache`)."""
    integration = None
    if storable_id(integration_id):
        integration = Integration.objects.filter(pk=integration_id).first()
    if integration is None:
        raise RootlineError(f"no integration {integration_id}")
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        integration.token_digest = token_digest(token)
        integration.save(update_fields=["token_digest"])
        audit_record(
            by=None,
            via=AuditRecord.Via.SYSTEM,
            target=integration,
            action="integration_rotate",
            field="token",
            old="issued",
            new="replaced",
        )
    return integration, token


def integration_admin_save(*, integration: Integration, user: User, changed: list[str]) -> None:
    """An integration saved in the admin, with one audit record per field the form changed."""
    before = Integration.objects.filter(pk=integration.pk).first() if integration.pk else None
    integration.save()
    for name in changed:
        audit_record(
            by=user,
            via=AuditRecord.Via.ADMIN,
            target=integration,
            action="integration_edit" if before else "integration_add",
            field=name,
            old=getattr(before, name, None) if before else None,
            new=getattr(integration, name),
        )


def integration_authenticate(*, integration_id: int, kind: str, token: str) -> Integration | None:
    """The active integration `integration_id` of this kind if `token` is its token, else None.

    An integration that matched is remembered in this process for
    `ROOTLINE_INTEGRATION_CACHE_SECONDS` (2 s): the webhook then needs no query to authenticate.
    The token is still compared in constant time on every request, and a token that does not
    match what is remembered is checked against the database, so a new token works at once;
    a disabled or deleted integration, or a replaced token, stops being accepted within that
    time (at once in the process that saved the change)."""
    if not token or not storable_id(integration_id):
        return None
    digest = token_digest(token)
    remembered = INTEGRATIONS.get_integration(integration_id, kind)
    if remembered is not None and hmac.compare_digest(remembered.token_digest, digest):
        return remembered
    integration = integration_active(integration_id, kind)
    if integration is None or not hmac.compare_digest(integration.token_digest, digest):
        return None
    INTEGRATIONS.put_integration(integration)
    return integration


class RecentCache(Generic[K, V]):
    """What authenticated lately, per process, for ROOTLINE_INTEGRATION_CACHE_SECONDS: integrations
    here, API tokens in `api_tokens`."""

    MAX_ENTRIES = 1024

    def __init__(self) -> None:
        self.entries: dict[K, tuple[float, V]] = {}
        self.lock = threading.Lock()

    def get(self, key: K) -> V | None:
        entry = self.entries.get(key)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, key: K, value: V) -> None:
        ttl = settings.ROOTLINE_INTEGRATION_CACHE_SECONDS
        if ttl <= 0:
            return
        with self.lock:
            if len(self.entries) >= self.MAX_ENTRIES:
                self.entries.clear()
            self.entries[key] = (time.monotonic() + ttl, value)

    def clear(self, **_: object) -> None:
        with self.lock:
            self.entries.clear()


class IntegrationCache(RecentCache[tuple[int, str], Integration]):
    """Integrations that authenticated a webhook lately, by (id, kind)."""

    def get_integration(self, integration_id: int, kind: str) -> Integration | None:
        return self.get((integration_id, kind))

    def put_integration(self, integration: Integration) -> None:
        self.put((integration.pk, integration.kind), integration)


INTEGRATIONS = IntegrationCache()
# A change saved in this process (admin, management commands, tests) applies at once here.
post_save.connect(INTEGRATIONS.clear, sender=Integration, dispatch_uid="rootline-integration-cache-save")
post_delete.connect(INTEGRATIONS.clear, sender=Integration, dispatch_uid="rootline-integration-cache-delete")


def integration_active(integration_id: int, kind: str) -> Integration | None:
    """The webhook's per-request lookup in plain SQL: compiling the ORM query cost more CPU than
    the query itself, on every request. Only the
    columns a webhook needs are read; the others load on access, as with `.only()`."""
    alias = router.db_for_read(Integration)
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(integration_active_sql(connection), [integration_id, kind])
        row = cursor.fetchone()
    return None if row is None else Integration.from_db(alias, integration_webhook_fields(), list(row))


INTEGRATION_WEBHOOK_FIELDS = {"id", "kind", "name", "token_digest", "rate_limit"}


def integration_webhook_fields() -> list[str]:
    return [
        field.attname
        for field in Integration._meta.concrete_fields
        if field.attname in INTEGRATION_WEBHOOK_FIELDS
    ]


def integration_active_sql(connection: BaseDatabaseWrapper) -> str:
    meta = Integration._meta
    quote = connection.ops.quote_name

    def column(name: str) -> str:
        return quote(concrete_field(Integration, name).column)

    return "SELECT {} FROM {} WHERE {} = %s AND {} = %s AND {}".format(
        ", ".join(column(name) for name in integration_webhook_fields()),
        quote(meta.db_table),
        column(meta.pk.name),
        column("kind"),
        column("is_active"),
    )


def roles_ensure() -> None:
    for role in ROLES:
        Group.objects.get_or_create(name=role)
