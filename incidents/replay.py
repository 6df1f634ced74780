"""Turn a simulated or exported action line into an action on the incident holding its alert then.

Lines name alerts by fingerprint (the occurrence firing at the action's `at`), since alert ids
differ between installations."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Q

from incidents.ingest.common import FieldError, parse_time
from incidents.models import Alert, Incident


class ReplayError(ValueError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def action_body_for(line: Any) -> tuple[Incident, dict]:
    if not isinstance(line, dict) or not isinstance(line.get("action"), str):
        raise ReplayError("expected an object with 'action', 'at', 'by'")
    at = line_time(line)
    body = {key: value for key, value in line.items() if key not in ("by", "fingerprint", "fingerprints", "into_fingerprint")}
    fingerprints = line.get("fingerprints") or ([line["fingerprint"]] if line.get("fingerprint") else [])
    if not fingerprints:
        raise ReplayError("expected 'fingerprint' or 'fingerprints' naming an alert of the incident")
    alerts = [occurrence_at(fingerprint, at) for fingerprint in fingerprints]
    incident = alerts[0].incident
    if incident is None:
        raise ReplayError(f"alert {fingerprints[0]} at {line['at']} is in no incident")
    while incident.merged_into_id:
        incident = incident.merged_into
    if line["action"] == "assign" and isinstance(line.get("username"), str):
        actor_for({"by": line["username"]})  # the assignee exists wherever the replay runs
    if line["action"] in ("exclude_alert", "false_positive"):
        body["alert_id"] = alerts[0].pk
    if line["action"] == "split":
        body["alert_ids"] = [alert.pk for alert in alerts]
    if line["action"] == "merge":
        target = occurrence_at(line.get("into_fingerprint", ""), at).incident
        if target is None:
            raise ReplayError("into_fingerprint: that alert is in no incident")
        while target.merged_into_id:
            target = target.merged_into
        body["into"] = target.pk
    return incident, body


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
        raise ReplayError(f"no alert {fingerprint!r} started by {at.isoformat()}")
    return alert


def actor_for(line: dict):
    """The action's user (`by`), created as a responder if new: replays act as their people."""
    username = line.get("by")
    if not isinstance(username, str) or not username.strip():
        raise ReplayError("by: expected a username")
    user, created = get_user_model().objects.get_or_create(username=username.strip()[:150])
    if created:
        user.groups.add(Group.objects.get_or_create(name="responder")[0])
    return user
