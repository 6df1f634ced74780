"""The audit record: every service that changes something for a person writes one row per field it
changed (who, when, from where, the object, old and new) in the transaction of the change, so a
change and its record land or fail together. Values are stored as JSON: times as RFC 3339 text,
users by username, never a secret (a token change records that it happened, not the token)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Model
from django.utils import timezone

from incidents.models import AuditRecord, Incident

# The field an incident action is about: its one audit record names it with its old and new value.
INCIDENT_ACTION_FIELDS = {
    "acknowledge": "acknowledged_at",
    "mitigate": "mitigated_at",
    "resolve": "status",
    "reopen": "status",
    "assign": "assignee",
    "severity": "severity",
    "degrade": "degradation",
    "merge": "merged_into",
    "note": "notes",
    "refresh_evidence": "evidence",
    "exclude_alert": "alerts",
    "false_positive": "false_positive_alerts",
    "split": "alerts",
}


def audit_record(
    *,
    by: User | AnonymousUser | None,
    via: str,
    target: Model | tuple[str, Any],
    action: str,
    field: str,
    old: Any,
    new: Any,
    detail: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> AuditRecord:
    """`target`: the changed row (named by its model and pk) or a (kind, id) pair for what has no
    row of its own (a user's API token)."""
    if via not in AuditRecord.Via.values:
        raise ValueError(f"via: expected one of {', '.join(AuditRecord.Via.values)}, got {via!r}")
    kind, object_id = target if isinstance(target, tuple) else (target._meta.model_name or "", target.pk)
    person = by if by is not None and by.pk else None
    return AuditRecord.objects.create(
        at=at or timezone.now(),
        by=person,
        by_name=person.get_username() if person else "",
        via=via,
        object_kind=kind,
        object_id=str(object_id),
        action=action,
        field=field,
        old=audit_value(old),
        new=audit_value(new),
        detail=detail or {},
    )


def audit_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, User):
        return value.get_username()
    if isinstance(value, Model):
        return value.pk
    return value


def incident_audit_state(incident: Incident) -> dict[str, Any]:
    """The fields of an incident a person's action can change, as its audit record shows them."""
    return {
        "status": incident.status,
        "acknowledged_at": incident.acknowledged_at,
        "mitigated_at": incident.mitigated_at,
        "assignee": incident.assignee.get_username() if incident.assignee_id and incident.assignee else None,
        "severity": incident.severity,
        "degradation": incident.degradation,
        "merged_into": incident.merged_into_id,
    }


def incident_action_audit(
    *,
    by: User | AnonymousUser,
    via: str,
    incident: Incident,
    action: str,
    before: dict[str, Any],
    body: dict[str, Any],
    at: datetime,
) -> AuditRecord:
    """One record for one action: the field it is about, as it stood before and after; the
    action's other effects (a mitigation also acknowledging) are in `detail.changed`."""
    field = INCIDENT_ACTION_FIELDS[action]
    after = incident_audit_state(Incident.objects.select_related("assignee").get(pk=incident.pk))
    changed = {name: [audit_value(before[name]), audit_value(after[name])] for name in after}
    changed = {name: pair for name, pair in changed.items() if pair[0] != pair[1]}
    if field in after:
        old, new = before[field], after[field]
    else:
        old, new = None, _action_value(action, body)
    return audit_record(
        by=by,
        via=via,
        target=incident,
        action=action,
        field=field,
        old=old,
        new=new,
        detail={"body": body, "changed": changed, "at": audit_value(at)},
    )


def _action_value(action: str, body: dict[str, Any]) -> Any:
    if action == "note":
        return body.get("text")
    if action in ("exclude_alert", "false_positive"):
        return body.get("alert_id")
    if action == "split":
        return body.get("alert_ids")
    return "requested"
