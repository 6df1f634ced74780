"""What people do to incidents. The API endpoint, the pages and `import_actions` (through
`incidents.replay`) all call `incident_act`, which checks the role, the body and the state,
records the action with who and when, and for grouping decisions (merge, split, exclude, false
positive) stores the decision and re-runs correlation, which never undoes it."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from incidents.correlation import correlation_run
from incidents.correlation.run import key_lock
from incidents.flow import evidence_enqueue
from incidents.ingest.common import FieldError, parse_time
from incidents.models import Alert, Decision, Incident, IncidentAction, IncidentEdge, RootCandidate, storable_id
from incidents.services.integrations import ROLES

ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}  # viewer < responder < author < admin
INCIDENT_ACTIONS = (
    "acknowledge", "assign", "note", "severity", "resolve", "reopen", "mitigate", "merge", "split",
    "exclude_alert", "false_positive", "degrade", "refresh_evidence",
)
# The fields each action takes besides `action` and `at`: anything else is a 400 naming it (a
# misspelt `at` would otherwise silently date the action now).
ACTION_FIELDS = {
    "acknowledge": (), "assign": ("username",), "note": ("text",), "severity": ("level",), "resolve": (), "reopen": (),
    "mitigate": (), "merge": ("into",), "split": ("alert_ids",), "exclude_alert": ("alert_id",),
    "false_positive": ("alert_id",), "degrade": ("level",), "refresh_evidence": (),
}
MAX_NOTE = 20_000
MAX_USERNAME = 150
# How far ahead of this server's clock an `at` may be: a client's clock running a little fast is
# skew; beyond it, an action dated later is one that has not happened yet.
CLOCK_SKEW = timedelta(minutes=5)


class ActionError(Exception):
    """The action cannot be taken; `status` is the HTTP answer (400 body, 403 role, 409 state)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Outcome:
    status: int
    incidents: list[Incident]
    split: bool = False


def role_of(user: AbstractBaseUser) -> str:
    """Roles are Django groups and rank viewer < responder < author < admin: each can do what the
    ones before it can. A superuser is an admin; a user in no group is a viewer."""
    if getattr(user, "is_superuser", False):
        return "admin"
    names = set(user.groups.values_list("name", flat=True)) if user.pk else set()
    return max(names & set(ROLE_RANK), key=ROLE_RANK.__getitem__, default="viewer")


def require_role(user: AbstractBaseUser, role: str) -> None:
    if ROLE_RANK[role_of(user)] < ROLE_RANK[role]:
        raise ActionError(403, f"this needs the {role} role; {user.get_username() or 'you'} is a {role_of(user)}")


def incident_act(*, incident: Incident, user: AbstractBaseUser, body: Any, replay_key: str | None = None) -> Outcome:
    require_role(user, "responder")
    at = action_body_check(body)
    if replay_key and IncidentAction.objects.filter(replay_key=replay_key).exists():
        return Outcome(200, [incident])
    action = body["action"]
    handler = HANDLERS[action]
    with transaction.atomic():
        key_lock(incident.correlation_key)
        incident = Incident.objects.select_for_update().filter(pk=incident.pk).first()
        if incident is None:
            raise ActionError(404, "the incident is gone (emptied by a correlation run meanwhile)")
        if incident.merged_into_id and action != "note":
            raise ActionError(409, f"incident {incident.pk} was merged into {incident.merged_into_id}; act on that one")
        if body.get("at") not in (None, "") and at < incident.started_at:
            raise ActionError(409, f"at: {rfc3339(at)} is before incident {incident.pk} began ({rfc3339(incident.started_at)})")
        return handler(incident=incident, user=user, body=body, at=at, replay_key=replay_key)


def action_body_check(body: Any) -> datetime:
    """What a body gets wrong in itself, whatever the incident (a 400): not an object, an unknown
    action, a field the action does not take, a text PostgreSQL cannot store, a bad or future
    `at`. Returns the action's moment. A replayed line is checked so before its alerts are there."""
    if not isinstance(body, dict):
        raise ActionError(400, "body: expected a JSON object with an 'action'")
    action = body.get("action")
    if action not in INCIDENT_ACTIONS:
        raise ActionError(400, f"action: expected one of {', '.join(INCIDENT_ACTIONS)}, got {str(action)[:40]!r}")
    unknown = sorted(name if name.isprintable() and len(name) <= 40 else repr(name[:40])
                     for name in map(str, body) if name not in ("action", "at", *ACTION_FIELDS[action]))
    if unknown:
        takes = ", ".join(("at", *ACTION_FIELDS[action]))
        raise ActionError(400, f"{unknown[0]}: not a field of {action}, which takes {takes}")
    for name in ACTION_FIELDS[action]:
        for value in (body[name] if isinstance(body.get(name), list) else [body.get(name)]):
            problem = unstorable(value)
            if problem:
                raise ActionError(400, f"{name}: {problem}")
    return action_time(body)


def rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def unstorable(value: Any) -> str | None:
    """What stops a text from being stored (PostgreSQL takes neither NUL nor a lone surrogate,
    which JSON can carry as \\ud800), else None."""
    if not isinstance(value, str):
        return None
    if "\x00" in value:
        return "contains a NUL byte"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains an unpaired surrogate (not valid Unicode)"
    return None


def action_time(body: dict) -> datetime:
    if body.get("at") in (None, ""):
        return timezone.now()
    try:
        moment = parse_time(body["at"], "at")
    except FieldError as exc:
        raise ActionError(400, str(exc)) from None
    if moment is None:
        raise ActionError(400, "at: zero time")
    not_in_the_future(moment)
    return moment


def not_in_the_future(moment: datetime) -> None:
    now = timezone.now()
    if moment > now + CLOCK_SKEW:
        raise ActionError(400, f"at: {rfc3339(moment)} is in the future: this server's time is {rfc3339(now.replace(microsecond=0))}, "
                               f"and at most {CLOCK_SKEW.seconds // 60} minutes ahead are taken as clock skew")


def record(incident: Incident, user, action: str, at: datetime, body: dict, replay_key: str | None, alert: Alert | None = None) -> IncidentAction:
    stored = {key: value for key, value in body.items() if key in ACTION_FIELDS.get(action, ())}
    return IncidentAction.objects.create(
        incident=incident, action=action, by=user if user.pk else None, at=at, body=stored, alert=alert, replay_key=replay_key
    )


def save(incident: Incident, **values: Any) -> None:
    for name, value in values.items():
        setattr(incident, name, value)
    incident.status = incident.derived_status()
    incident.save(update_fields=[*values, "status", "updated_at"])


# Status ----------------------------------------------------------------------------------
# Actions may be replayed after the alerts (imports, late entries with `at`), so each is judged
# against the incident as it stood at its `at`: an acknowledge at 02:07 of an incident that the
# alerts resolved at 02:40 is accepted; one after a person resolved it is a conflict.


def resolved_before(incident: Incident, at: datetime) -> bool:
    return incident.resolved_at is not None and incident.resolved_at <= at


def acknowledge(*, incident, user, body, at, replay_key) -> Outcome:
    if incident.acknowledged_at is not None:
        raise ActionError(409, f"incident {incident.pk} was already acknowledged at {rfc3339(incident.acknowledged_at)}")
    if resolved_before(incident, at):
        raise ActionError(409, f"incident {incident.pk} was resolved at {rfc3339(incident.resolved_at)}, before this acknowledge")
    save(incident, acknowledged_at=at)
    record(incident, user, "acknowledge", at, body, replay_key)
    return Outcome(200, [incident])


def mitigate(*, incident, user, body, at, replay_key) -> Outcome:
    if incident.mitigated_at is not None:
        raise ActionError(409, f"incident {incident.pk} was already mitigated at {rfc3339(incident.mitigated_at)}")
    if resolved_before(incident, at):
        raise ActionError(409, f"incident {incident.pk} was resolved at {rfc3339(incident.resolved_at)}, before this mitigation")
    save(incident, mitigated_at=at, acknowledged_at=min(incident.acknowledged_at or at, at))
    record(incident, user, "mitigate", at, body, replay_key)
    return Outcome(200, [incident])


def resolve(*, incident, user, body, at, replay_key) -> Outcome:
    """A person's resolution is the official one, even after the alerts resolved it."""
    if incident.resolved_by_human:
        raise ActionError(409, f"incident {incident.pk} was already resolved at {rfc3339(incident.resolved_at)}")
    save(incident, resolved_at=at, resolved_by_human=True, reopened_by_human=False)
    record(incident, user, "resolve", at, body, replay_key)
    return Outcome(200, [incident])


def reopen(*, incident, user, body, at, replay_key) -> Outcome:
    """Trouble is back: the incident is active again (its mitigation no longer holds; the
    recorded mitigate action keeps its time for the timeline)."""
    if incident.resolved_at is None:
        raise ActionError(409, f"incident {incident.pk} is {incident.status}; only a resolved incident can be reopened")
    save(incident, resolved_at=None, mitigated_at=None, resolved_by_human=False, reopened_by_human=True)
    record(incident, user, "reopen", at, body, replay_key)
    return Outcome(200, [incident])


# Attributes ------------------------------------------------------------------------------


def assign(*, incident, user, body, at, replay_key) -> Outcome:
    username = body.get("username")
    if not isinstance(username, str) or not username:
        raise ActionError(400, "username: expected the username of the assignee")
    if len(username) > MAX_USERNAME:
        raise ActionError(400, f"username: no user {username[:60]!r}… (usernames have at most {MAX_USERNAME} characters)")
    assignee = get_user_model().objects.filter(username=username).first()
    if assignee is None:
        raise ActionError(400, f"username: no user {username[:150]!r}")
    save(incident, assignee=assignee)
    record(incident, user, "assign", at, body, replay_key)
    return Outcome(200, [incident])


def note(*, incident, user, body, at, replay_key) -> Outcome:
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ActionError(400, "text: expected the note's text")
    if len(text) > MAX_NOTE or "\x00" in text:
        raise ActionError(400, f"text: at most {MAX_NOTE} characters, without NUL")
    record(incident, user, "note", at, {"text": text}, replay_key)
    return Outcome(200, [incident])


def severity(*, incident, user, body, at, replay_key) -> Outcome:
    level = body.get("level")
    if level not in Incident.Severity.values:
        raise ActionError(400, f"level: expected one of {', '.join(Incident.Severity.values)}")
    save(incident, severity=level, severity_by_human=True)
    record(incident, user, "severity", at, body, replay_key)
    return Outcome(200, [incident])


def degrade(*, incident, user, body, at, replay_key) -> Outcome:
    level = body.get("level")
    if level not in Incident.Degradation.values:
        raise ActionError(400, f"level: expected one of {', '.join(Incident.Degradation.values)}")
    save(incident, degradation=level)
    record(incident, user, "degrade", at, body, replay_key)
    return Outcome(200, [incident])


def refresh_evidence(*, incident, user, body, at, replay_key) -> Outcome:
    record(incident, user, "refresh_evidence", at, body, replay_key)
    evidence_enqueue([incident.pk])
    return Outcome(202, [incident])


# Grouping decisions ----------------------------------------------------------------------


def alert_of(incident: Incident, value: Any, field: str = "alert_id") -> Alert:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ActionError(400, f"{field}: expected an alert id (integer)")
    alert = Alert.objects.filter(pk=value).first() if storable_id(value) else None
    if alert is None:
        raise ActionError(400, f"{field}: no alert {value}")
    if alert.incident_id != incident.pk:
        raise ActionError(409, f"{field}: alert {value} is not in incident {incident.pk}")
    return alert


def decide(incident: Incident, user, kind: str, alerts: list[Alert], at: datetime, action: IncidentAction) -> None:
    """Store the decision and mark the incident's alerts for the next run, which recomputes them."""
    Decision.objects.create(
        kind=kind, alert_keys=[alert.key for alert in alerts], correlation_key=incident.correlation_key,
        by=user if user.pk else None, at=at, action=action,
    )
    Alert.objects.filter(Q(incident=incident) | Q(pk__in=[alert.pk for alert in alerts])).update(correlated=False)


def exclude_alert(*, incident, user, body, at, replay_key) -> Outcome:
    alert = alert_of(incident, body.get("alert_id"))
    action = record(incident, user, "exclude_alert", at, body, replay_key, alert)
    decide(incident, user, Decision.Kind.EXCLUDE, [alert], at, action)
    correlation_run(key=incident.correlation_key)
    incident = refreshed(incident)
    if not incident.alerts.exists():
        emptied(incident, at)
    return Outcome(200, [incident])


def emptied(incident: Incident, at: datetime) -> None:
    """Its last alert excluded, an incident is kept for its actions, but no correlation run will
    touch it again (runs rewrite incidents that hold alerts): its root, chain, edges and candidates
    named the excluded alert and go, and if it was still open it is resolved by that decision."""
    values = ranking_cleared(incident)
    if incident.resolved_at is None:
        values.update(resolved_at=at, resolved_by_human=True)
    save(incident, **values)


def ranking_cleared(incident: Incident) -> dict[str, Any]:
    """Drop the edges and candidates of an incident left without alerts (merged away, or its last
    alert excluded): they name alerts it no longer holds. Returns the fields to save with it."""
    IncidentEdge.objects.filter(incident=incident).delete()
    RootCandidate.objects.filter(incident=incident).delete()
    return {"root_alert": None, "root_confidence": None, "root_explanation": "", "chain": [], "layers": [],
            "failure_modes": [], "ranking_held": False}


def false_positive(*, incident, user, body, at, replay_key) -> Outcome:
    alert = alert_of(incident, body.get("alert_id"))
    if alert.false_positive:
        judged = IncidentAction.objects.filter(action="false_positive", alert=alert).order_by("at").first()
        when = f" at {rfc3339(judged.at)}" if judged else ""
        raise ActionError(409, f"alert_id: alert {alert.pk} was already judged a false positive{when}")
    action = record(incident, user, "false_positive", at, body, replay_key, alert)
    decide(incident, user, Decision.Kind.FALSE_POSITIVE, [alert], at, action)
    Alert.objects.filter(pk=alert.pk).update(false_positive=True)
    correlation_run(key=incident.correlation_key)
    return Outcome(200, [refreshed(incident)])


def merge(*, incident, user, body, at, replay_key) -> Outcome:
    into_id = body.get("into")
    if not isinstance(into_id, int) or isinstance(into_id, bool):
        raise ActionError(400, "into: expected the id of the incident to merge into")
    target = Incident.objects.filter(pk=into_id).first() if storable_id(into_id) else None
    if target is None:
        raise ActionError(400, f"into: no incident {into_id}")
    if target.pk == incident.pk:
        raise ActionError(409, "into: an incident cannot be merged into itself")
    if target.correlation_key != incident.correlation_key:
        raise ActionError(409, f"into: incident {target.pk} is in cluster {target.correlation_key!r}, this one in {incident.correlation_key!r}")
    target = Incident.objects.select_for_update().get(pk=target.pk)  # locked only once known to share this key's lock
    if target.merged_into_id:
        raise ActionError(409, f"into: incident {target.pk} was itself merged into {target.merged_into_id}")
    alerts = list(Alert.objects.filter(incident__in=[incident, target]))
    action = record(incident, user, "merge", at, body, replay_key)
    decide(incident, user, Decision.Kind.MERGE, alerts, at, action)
    IncidentAction.objects.create(incident=target, action="merge", by=user if user.pk else None, at=at, body={"from": incident.pk})
    save(incident, merged_into=target, **ranking_cleared(incident))
    Alert.objects.filter(incident=incident).update(incident=target)
    correlation_run(key=incident.correlation_key)
    return Outcome(200, [refreshed(target)])


def split(*, incident, user, body, at, replay_key) -> Outcome:
    ids = body.get("alert_ids")
    if not isinstance(ids, list) or not ids:
        raise ActionError(400, "alert_ids: expected a non-empty list of alert ids")
    for index, value in enumerate(ids):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ActionError(400, f"alert_ids[{index}]: expected an alert id (integer)")
    found = Alert.objects.in_bulk([value for value in set(ids) if storable_id(value)])  # one query, however long the list
    for index, value in enumerate(ids):
        if value not in found:
            raise ActionError(400, f"alert_ids[{index}]: no alert {value}")
        if found[value].incident_id != incident.pk:
            raise ActionError(409, f"alert_ids[{index}]: alert {value} is not in incident {incident.pk}")
    alerts = [found[value] for value in dict.fromkeys(ids)]
    if len(alerts) == incident.alerts.count():
        raise ActionError(409, "alert_ids: that is every alert of the incident; nothing would be split off")
    members = list(incident.alerts.values_list("pk", flat=True))
    action = record(incident, user, "split", at, body, replay_key)
    decide(incident, user, Decision.Kind.SPLIT, alerts, at, action)
    correlation_run(key=incident.correlation_key)
    # The larger part keeps the incident's id, be it the part split off: answer every incident
    # that now holds one of its alerts, this one first.
    holders = set(Alert.objects.filter(pk__in=members).values_list("incident_id", flat=True)) - {None, incident.pk}
    return Outcome(200, [refreshed(incident), *Incident.objects.filter(pk__in=holders).order_by("pk")], split=True)


def refreshed(incident: Incident) -> Incident:
    return Incident.objects.get(pk=incident.pk)


HANDLERS = {
    "acknowledge": acknowledge, "assign": assign, "note": note, "severity": severity, "resolve": resolve, "reopen": reopen,
    "mitigate": mitigate, "merge": merge, "split": split, "exclude_alert": exclude_alert, "false_positive": false_positive,
    "degrade": degrade, "refresh_evidence": refresh_evidence,
}
