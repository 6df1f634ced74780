"""Imported action lines kept until their alerts arrive (`PendingAction`): kept, waiting, failed,
expired, and forgotten once applied. Reading the lines and applying them is `incidents/replay.py`."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from incidents.models import PendingAction


def pending_action_keep(
    *, replay_key: str, line: dict, at: datetime, source: str, waiting_for: str
) -> PendingAction:
    """Keep a line whose alerts are not there yet; importing it again updates the same row (and
    gives one that had failed or expired another try, with a new time limit)."""
    pending, _ = PendingAction.objects.update_or_create(
        replay_key=replay_key,
        defaults={
            "line": line,
            "at": at,
            "source": source[:300],
            "waiting_for": waiting_for,
            "error": "",
            "failed_at": None,
            "expired_at": None,
            "kept_at": timezone.now(),
        },
    )
    return pending


def pending_action_settle(*, replay_key: str) -> None:
    """A line applied (now or before) no longer waits."""
    PendingAction.objects.filter(replay_key=replay_key).delete()


def pending_action_wait(*, pending: PendingAction, waiting_for: str) -> None:
    PendingAction.objects.filter(pk=pending.pk).update(waiting_for=waiting_for)


def pending_action_fail(*, pending: PendingAction, error: str) -> None:
    """A line that cannot be applied keeps its error and is not tried again (re-import it for that)."""
    PendingAction.objects.filter(pk=pending.pk).update(error=error, failed_at=timezone.now())


def pending_action_mark_expired(*, pending: PendingAction, missing: str, reason: str, now: datetime) -> None:
    PendingAction.objects.filter(pk=pending.pk, expired_at=None).update(
        waiting_for=missing, error=reason, expired_at=now
    )
