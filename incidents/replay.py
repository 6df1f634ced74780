"""Action lines (`import_actions`, `demo`): each is applied through its typed service as its user `by`,
at its `at`, to the incident holding its alert then. Lines name alerts by fingerprint (the
occurrence firing at the action's `at`), since alert ids differ between installations.

The imports may run in any order: a line whose alerts are not stored, or not correlated into an
incident, yet is kept as a `PendingAction` and applied once they are by `pending_actions_apply`
(at the end of `import_alerts`, and periodically on a worker), as if imported after them; one
whose alerts never come expires `PENDING_ACTION_TTL_HOURS` after it was kept."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError
from django.db.models import Q
from django.utils import timezone

from correlate.ingest.common import FieldError, parse_time
from incidents.action_bodies import action_call, unstorable
from incidents.models import Alert, AuditRecord, Incident, IncidentAction, PendingAction
from incidents.services.errors import RootlineError
from incidents.services.pending_actions import (
    pending_action_fail,
    pending_action_keep,
    pending_action_mark_expired,
    pending_action_settle,
    pending_action_wait,
)
from incidents.services.roles import require_role, user_ensure

logger = logging.getLogger(__name__)

NAMING_FIELDS = ("by", "fingerprint", "fingerprints", "into_fingerprint")
# A simulated file also names each occurrence by its start (docs/simulator.md); the contract's
# lines name it by fingerprint, firing at `at`, which is what `action_body_for` reads.
OCCURRENCE_STARTS = ("starts_at", "starts_ats", "into_starts_at")


class ReplayError(RootlineError):
    """A line that cannot be applied as it is written."""


class AlertsNotThereYet(ReplayError):
    """The line's alerts are not stored yet, or not correlated into an incident yet: it can wait."""


def action_line_apply(*, line: Any) -> str:
    """One line, applied as the endpoint applies a body: "applied", or "already" when an import
    applied this very line before. That is checked first: the line may itself have moved its
    alert (an exclude), so that its alert names no incident any more. What a line gets wrong in
    itself (its user's role, its fields, its `at`) is checked before its alerts are looked up, so
    that only a line that could be applied waits. Raises AlertsNotThereYet for a line that can
    wait, RootlineError (ReplayError among them) for one that cannot be applied."""
    line_check(line)
    key = replay_key_of(line)
    if IncidentAction.objects.filter(replay_key=key).exists():
        return settled(key, "already")
    user = actor_for(line)
    require_role(user, "responder")
    action_call(line_body(line))
    incident, body = action_body_for(line)
    try:
        action_call(body).apply(incident=incident, user=user, via=AuditRecord.Via.IMPORT, idempotency_key=key)
    except IntegrityError:  # another import applied the same line at the same moment
        if IncidentAction.objects.filter(replay_key=key).exists():
            return settled(key, "already")
        raise
    return settled(key, "applied")


def line_check(line: Any) -> None:
    if not isinstance(line, dict):
        raise ReplayError("expected an object with 'action', 'at', 'by'")
    for field, value in line.items():
        problem = unstorable(field) or nested_unstorable(value)
        if problem:
            raise ReplayError(f"{field if field.isprintable() else repr(field[:40])}: {problem}")
    line_time(line)
    naming_check(line)


def nested_unstorable(value: Any) -> str | None:
    """`unstorable` of every text in a JSON value, keys included, at any depth: a line that
    waits is kept whole in a jsonb column, which takes neither NUL nor a lone surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item
        elif problem := unstorable(item):
            return problem
    return None


def naming_check(line: dict) -> None:
    """Fingerprints that can name a stored alert, or the line would wait for ever."""
    names = line.get("fingerprints") or [line.get("fingerprint")]
    if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
        raise ReplayError("expected 'fingerprint' or 'fingerprints' naming an alert of the incident")
    into = line.get("into_fingerprint")
    if line.get("action") == "merge" and not (isinstance(into, str) and into):
        raise ReplayError(
            "into_fingerprint: expected the fingerprint of an alert of the incident to merge into"
        )


def replay_key_of(line: dict) -> str:
    return hashlib.sha256(json.dumps(line, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def line_body(line: dict) -> dict:
    """The endpoint's body the line stands for, before its alerts are named by id."""
    return {name: value for name, value in line.items() if name not in (*NAMING_FIELDS, *OCCURRENCE_STARTS)}


def settled(key: str, outcome: str) -> str:
    """A line applied (now or before) no longer waits."""
    pending_action_settle(replay_key=key)
    return outcome


# Lines that wait for their alerts -----------------------------------------------------------


def action_line_keep_pending(*, line: dict, source: str, waiting_for: str) -> PendingAction:
    """Keep a line that raised AlertsNotThereYet; importing it again updates the same row (and
    gives one that had failed or expired another try, with a new time limit)."""
    return pending_action_keep(
        replay_key=replay_key_of(line), line=line, at=line_time(line), source=source, waiting_for=waiting_for
    )


def pending_actions_apply(*, now: datetime | None = None) -> dict[str, int]:
    """Try every kept line, earliest `at` first (the order its people acted in): at the end of
    `import_alerts`, and by the periodic task `incidents.apply_pending_actions`. A line applied
    is forgotten (its IncidentAction has its key); one whose alerts are still missing stays, until
    `PENDING_ACTION_TTL_HOURS` after it was kept: then it expires, naming the alerts that never
    came, since a line tried every 30 s for ever is work and noise for nothing. One that fails
    keeps its error; neither a failed nor an expired line is tried again (re-import it for that)."""
    now = now or timezone.now()
    kept_before = now - timedelta(hours=settings.PENDING_ACTION_TTL_HOURS)
    totals = {"applied": 0, "already": 0, "pending": 0, "failed": 0, "expired": 0}
    for pending in PendingAction.objects.waiting().order_by("at", "id"):
        totals[pending_action_try(pending, expire=pending.kept_at <= kept_before, now=now)] += 1
    return totals


def pending_action_try(pending: PendingAction, *, expire: bool = False, now: datetime | None = None) -> str:
    """Tried once more even when its time is up: alerts that came at the last moment still count."""
    try:
        return action_line_apply(line=pending.line)
    except AlertsNotThereYet as exc:
        if expire:
            return pending_action_expire(pending, now=now or timezone.now())
        pending_action_wait(pending=pending, waiting_for=exc.message)
        return "pending"
    except RootlineError as exc:
        if IncidentAction.objects.filter(replay_key=pending.replay_key).exists():
            return settled(pending.replay_key, "already")  # applied meanwhile, by an import of its line
        pending_action_fail(pending=pending, error=exc.message)
        logger.warning("pending action %s could not be applied: %s", pending.source, exc.message)
        return "failed"


def pending_action_expire(pending: PendingAction, *, now: datetime) -> str:
    missing = "; ".join(alerts_missing(pending.line)) or pending.waiting_for
    hours = settings.PENDING_ACTION_TTL_HOURS
    reason = f"expired: its alerts did not arrive within {hours} h of its import: {missing}"
    pending_action_mark_expired(pending=pending, missing=missing, reason=reason, now=now)
    logger.warning(
        "pending action %s (%s at %s) %s",
        pending.source,
        pending.line.get("action"),
        pending.at.isoformat(),
        reason,
    )
    return "expired"


def alerts_missing(line: dict) -> list[str]:
    """Every alert the line names that is not stored, or not correlated, yet (a line waits on the
    first one it meets; an expired one names them all)."""
    at = line_time(line)
    names = [*(line.get("fingerprints") or [line.get("fingerprint")]), line.get("into_fingerprint")]
    missing = []
    for fingerprint in dict.fromkeys(name for name in names if isinstance(name, str) and name):
        try:
            correlated_by_now([occurrence_at(fingerprint, at)])
        except AlertsNotThereYet as exc:
            missing.append(exc.message)
    return missing


# Naming alerts --------------------------------------------------------------------------------


def action_body_for(line: dict) -> tuple[Incident, dict]:
    """The incident a checked line acts on, and its body with the alerts named by id."""
    at = line_time(line)
    body = line_body(line)
    fingerprints = line.get("fingerprints") or [line["fingerprint"]]
    alerts = [occurrence_at(fingerprint, at) for fingerprint in fingerprints]
    correlated_by_now(alerts)
    incident = alerts[0].incident
    if incident is None:
        raise ReplayError(f"alert {fingerprints[0]} at {line['at']} is in no incident")
    while (onward := incident.merged_into) is not None:
        incident = onward
    if line["action"] == "assign" and isinstance(line.get("username"), str):
        actor_for({"by": line["username"]})  # the assignee exists wherever the replay runs
    if line["action"] in ("exclude_alert", "false_positive"):
        body["alert_id"] = alerts[0].pk
    if line["action"] == "split":
        body["alert_ids"] = [alert.pk for alert in alerts]
    if line["action"] == "merge":
        body["into"] = merge_target(line, at).pk
    return incident, body


def merge_target(line: dict, at: datetime) -> Incident:
    into = occurrence_at(line["into_fingerprint"], at)
    correlated_by_now([into])
    target = into.incident
    if target is None:
        raise ReplayError("into_fingerprint: that alert is in no incident")
    while (onward := target.merged_into) is not None:
        target = onward
    return target


def line_time(line: dict) -> datetime:
    try:
        at = parse_time(line.get("at"), "at")
    except FieldError as exc:
        raise ReplayError(str(exc)) from None
    if at is None:
        raise ReplayError("at: zero time")
    return at


def occurrence_at(fingerprint: str, at: datetime) -> Alert:
    """The occurrence of `fingerprint` firing at `at`; else the latest one that started before."""
    occurrences = Alert.objects.filter(fingerprint=fingerprint, starts_at__lte=at).select_related("incident")
    firing = occurrences.filter(Q(ends_at__isnull=True) | Q(ends_at__gte=at)).order_by("-starts_at").first()
    alert = firing or occurrences.order_by("-starts_at").first()
    if alert is None:
        raise AlertsNotThereYet(f"no alert {fingerprint!r} that started by {at.isoformat()} is stored yet")
    return alert


def correlated_by_now(alerts: list[Alert]) -> None:
    """An alert in no incident that no correlation run has seen yet will be in one (a worker has
    it queued); one a run has seen and left out was excluded, and names no incident for good."""
    for alert in alerts:
        if alert.incident_id is None and not alert.correlated:
            raise AlertsNotThereYet(
                f"alert {alert.fingerprint} (started {alert.starts_at.isoformat()}) is stored but "
                "not correlated into an incident yet"
            )


def actor_for(line: dict):
    """The action's user (`by`), created as a responder if new: replays act as their people."""
    username = line.get("by")
    if not isinstance(username, str) or not username.strip():
        raise ReplayError("by: expected a username")
    return user_ensure(username=username.strip()[:150], role="responder")
