"""What people do to incidents: one typed, keyword-only service per action (`incident_acknowledge`,
`incident_merge`, ...), which the API, the pages, `import_actions` and the demo call (through
`incidents/action_bodies.py`, which reads their bodies). Each checks the role, then, under the
cluster's correlation lock and the incident's row lock, the state as it stood at `at`; records
the action with who and when; and for grouping decisions (merge, split, exclude, false positive)
stores the decision and re-runs correlation, which never undoes it. `idempotency_key`: an
action applied with a key it was applied with before changes nothing (a replayed import line).

Actions may be replayed after the alerts (imports, late entries with `at`), so each is judged
against the incident as it stood at its `at`: an acknowledge at 02:07 of an incident that the
alerts resolved at 02:40 is accepted; one after a person resolved it is a conflict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from incidents import flow
from incidents.flow import evidence_enqueue
from incidents.models import (
    Alert,
    Decision,
    Incident,
    IncidentAction,
    IncidentEdge,
    RootCandidate,
    storable_id,
)
from incidents.services.audit import incident_action_audit, incident_audit_state
from incidents.services.correlation import correlation_run
from incidents.services.correlation.run import key_lock
from incidents.services.errors import conflict, invalid, not_found
from incidents.services.roles import require_role

MAX_NOTE = 20_000
MAX_USERNAME = 150
# How far ahead of this server's clock an `at` may be: a client's clock running a little fast is
# skew; beyond it, an action dated later is one that has not happened yet.
CLOCK_SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class Outcome:
    """The incidents an action leaves (merge: the surviving one; split: every holder of its
    alerts, this one first); `accepted`: the work goes on in the background (refresh_evidence)."""

    incidents: list[Incident]
    split: bool = False
    accepted: bool = False


Handler = Callable[..., Outcome]


def incident_acknowledge(
    *,
    incident: Incident,
    user: User,
    via: str,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(incident, user, via, "acknowledge", {}, at, idempotency_key, _acknowledge)


def incident_mitigate(
    *,
    incident: Incident,
    user: User,
    via: str,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(incident, user, via, "mitigate", {}, at, idempotency_key, _mitigate)


def incident_resolve(
    *,
    incident: Incident,
    user: User,
    via: str,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(incident, user, via, "resolve", {}, at, idempotency_key, _resolve)


def incident_reopen(
    *,
    incident: Incident,
    user: User,
    via: str,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(incident, user, via, "reopen", {}, at, idempotency_key, _reopen)


def incident_assign(
    *,
    incident: Incident,
    user: User,
    via: str,
    username: str,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(incident, user, via, "assign", {"username": username}, at, idempotency_key, _assign)


def incident_note(
    *,
    incident: Incident,
    user: User,
    via: str,
    text: str,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(incident, user, via, "note", {"text": text}, at, idempotency_key, _note)


def incident_set_severity(
    *,
    incident: Incident,
    user: User,
    via: str,
    level: str,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(incident, user, via, "severity", {"level": level}, at, idempotency_key, _severity)


def incident_set_degradation(
    *,
    incident: Incident,
    user: User,
    via: str,
    level: str,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(incident, user, via, "degrade", {"level": level}, at, idempotency_key, _degrade)


def incident_refresh_evidence(
    *,
    incident: Incident,
    user: User,
    via: str,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(incident, user, via, "refresh_evidence", {}, at, idempotency_key, _refresh_evidence)


def incident_exclude_alert(
    *,
    incident: Incident,
    user: User,
    via: str,
    alert_id: int,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(
        incident, user, via, "exclude_alert", {"alert_id": alert_id}, at, idempotency_key, _exclude_alert
    )


def incident_mark_false_positive(
    *,
    incident: Incident,
    user: User,
    via: str,
    alert_id: int,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(
        incident, user, via, "false_positive", {"alert_id": alert_id}, at, idempotency_key, _false_positive
    )


def incident_merge(
    *,
    incident: Incident,
    into: int,
    user: User,
    via: str,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(incident, user, via, "merge", {"into": into}, at, idempotency_key, _merge)


def incident_split(
    *,
    incident: Incident,
    alert_ids: list[int],
    user: User,
    via: str,
    at: datetime | None = None,
    idempotency_key: str | None = None,
) -> Outcome:
    return act(incident, user, via, "split", {"alert_ids": alert_ids}, at, idempotency_key, _split)


def act(
    incident: Incident,
    user: User,
    via: str,
    action: str,
    fields: dict[str, Any],
    at: datetime | None,
    idempotency_key: str | None,
    handler: Handler,
) -> Outcome:
    """What every action shares: the role, `at` (now when not given; never in the future), the
    idempotency key, then the handler under the cluster's lock and the incident's row lock, and
    its audit record (`via`: page, api, import) in the same transaction."""
    require_role(user, "responder")
    dated = at is not None
    if at is None:
        at = timezone.now()
    else:
        not_in_the_future(at)
    if idempotency_key and IncidentAction.objects.filter(replay_key=idempotency_key).exists():
        return Outcome([incident])
    with transaction.atomic():
        key_lock(incident.correlation_key)
        locked = Incident.objects.select_for_update().filter(pk=incident.pk).first()
        if locked is None:
            raise not_found("the incident is gone (emptied by a correlation run meanwhile)")
        if locked.merged_into_id and action != "note":
            raise conflict(f"incident {locked.pk} was merged into {locked.merged_into_id}; act on that one")
        if dated and at < locked.started_at:
            raise conflict(
                f"at: {rfc3339(at)} is before incident {locked.pk} began ({rfc3339(locked.started_at)})"
            )
        before = incident_audit_state(locked)
        outcome = handler(incident=locked, user=user, body=fields, at=at, replay_key=idempotency_key)
        incident_action_audit(
            by=user, via=via, incident=locked, action=action, before=before, body=fields, at=at
        )
        return outcome


def rfc3339(moment: datetime | None) -> str:
    return moment.isoformat().replace("+00:00", "Z") if moment else "an unknown time"


def not_in_the_future(moment: datetime) -> None:
    now = timezone.now()
    if moment > now + CLOCK_SKEW:
        raise invalid(
            f"at: {rfc3339(moment)} is in the future: "
            f"this server's time is {rfc3339(now.replace(microsecond=0))}, "
            f"and at most {CLOCK_SKEW.seconds // 60} minutes ahead are taken as clock skew"
        )


def record(
    incident: Incident,
    user: User,
    action: str,
    at: datetime,
    body: dict[str, Any],
    replay_key: str | None,
    alert: Alert | None = None,
) -> IncidentAction:
    stored = dict(body)
    return IncidentAction.objects.create(
        incident=incident,
        action=action,
        by=user if user.pk else None,
        at=at,
        body=stored,
        alert=alert,
        replay_key=replay_key,
    )


def save(incident: Incident, **values: Any) -> None:
    for name, value in values.items():
        setattr(incident, name, value)
    incident.status = incident.derived_status()
    incident.save(update_fields=[*values, "status", "updated_at"])


# Status ----------------------------------------------------------------------------------


def resolved_before(incident: Incident, at: datetime) -> bool:
    return incident.resolved_at is not None and incident.resolved_at <= at


def _acknowledge(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    if incident.acknowledged_at is not None:
        raise conflict(
            f"incident {incident.pk} was already acknowledged at {rfc3339(incident.acknowledged_at)}"
        )
    if resolved_before(incident, at):
        raise conflict(
            f"incident {incident.pk} was resolved at {rfc3339(incident.resolved_at)}, before this acknowledge"
        )
    save(incident, acknowledged_at=at)
    record(incident, user, "acknowledge", at, body, replay_key)
    return Outcome([incident])


def _mitigate(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    if incident.mitigated_at is not None:
        raise conflict(f"incident {incident.pk} was already mitigated at {rfc3339(incident.mitigated_at)}")
    if resolved_before(incident, at):
        raise conflict(
            f"incident {incident.pk} was resolved at {rfc3339(incident.resolved_at)}, before this mitigation"
        )
    save(incident, mitigated_at=at, acknowledged_at=min(incident.acknowledged_at or at, at))
    record(incident, user, "mitigate", at, body, replay_key)
    return Outcome([incident])


def _resolve(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    """A person's resolution is the official one, even after the alerts resolved it."""
    if incident.resolved_by_human:
        raise conflict(f"incident {incident.pk} was already resolved at {rfc3339(incident.resolved_at)}")
    save(incident, resolved_at=at, resolved_by_human=True, reopened_by_human=False)
    record(incident, user, "resolve", at, body, replay_key)
    flow.postmortem_after_resolve(incident.pk)
    return Outcome([incident])


def _reopen(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    """Trouble is back: the incident is active again (its mitigation no longer holds; the
    recorded mitigate action keeps its time for the timeline)."""
    if incident.resolved_at is None:
        raise conflict(
            f"incident {incident.pk} is {incident.status}; only a resolved incident can be reopened"
        )
    save(incident, resolved_at=None, mitigated_at=None, resolved_by_human=False, reopened_by_human=True)
    record(incident, user, "reopen", at, body, replay_key)
    return Outcome([incident])


# Attributes ------------------------------------------------------------------------------


def _assign(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    username = body.get("username")
    if not isinstance(username, str) or not username:
        raise invalid("username: expected the username of the assignee")
    if len(username) > MAX_USERNAME:
        raise invalid(
            f"username: no user {username[:60]!r}… (usernames have at most {MAX_USERNAME} characters)"
        )
    assignee = get_user_model().objects.filter(username=username).first()
    if assignee is None:
        raise invalid(f"username: no user {username[:150]!r}")
    save(incident, assignee=assignee)
    record(incident, user, "assign", at, body, replay_key)
    return Outcome([incident])


def _note(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise invalid("text: expected the note's text")
    if len(text) > MAX_NOTE or "\x00" in text:
        raise invalid(f"text: at most {MAX_NOTE} characters, without NUL")
    record(incident, user, "note", at, {"text": text}, replay_key)
    return Outcome([incident])


def _severity(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    level = body.get("level")
    if level not in Incident.Severity.values:
        raise invalid(f"level: expected one of {', '.join(Incident.Severity.values)}")
    save(incident, severity=level, severity_by_human=True)
    record(incident, user, "severity", at, body, replay_key)
    return Outcome([incident])


def _degrade(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    level = body.get("level")
    if level not in Incident.Degradation.values:
        raise invalid(f"level: expected one of {', '.join(Incident.Degradation.values)}")
    save(incident, degradation=level)
    record(incident, user, "degrade", at, body, replay_key)
    return Outcome([incident])


def _refresh_evidence(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    record(incident, user, "refresh_evidence", at, body, replay_key)
    evidence_enqueue([incident.pk], asked=True)
    return Outcome([incident], accepted=True)


# Grouping decisions ----------------------------------------------------------------------


def alert_of(incident: Incident, value: Any, field: str = "alert_id") -> Alert:
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid(f"{field}: expected an alert id (integer)")
    alert = Alert.objects.filter(pk=value).first() if storable_id(value) else None
    if alert is None:
        raise invalid(f"{field}: no alert {value}")
    if alert.incident_id != incident.pk:
        raise conflict(f"{field}: alert {value} is not in incident {incident.pk}")
    return alert


def decide(
    incident: Incident, user: User, kind: str, alerts: list[Alert], at: datetime, action: IncidentAction
) -> None:
    """Store the decision and mark the incident's alerts for the next run, which recomputes them."""
    Decision.objects.create(
        kind=kind,
        alert_keys=[alert.key for alert in alerts],
        correlation_key=incident.correlation_key,
        by=user if user.pk else None,
        at=at,
        action=action,
    )
    Alert.objects.filter(Q(incident=incident) | Q(pk__in=[alert.pk for alert in alerts])).update(
        correlated=False
    )


def _exclude_alert(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    alert = alert_of(incident, body.get("alert_id"))
    action = record(incident, user, "exclude_alert", at, body, replay_key, alert)
    decide(incident, user, Decision.Kind.EXCLUDE, [alert], at, action)
    correlation_run(key=incident.correlation_key)
    incident = refreshed(incident)
    if not incident.alerts.exists():
        emptied(incident, at)
    return Outcome([incident])


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
    return {
        "root_alert": None,
        "root_confidence": None,
        "root_explanation": "",
        "chain": [],
        "layers": [],
        "failure_modes": [],
        "ranking_held": False,
    }


def _false_positive(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    alert = alert_of(incident, body.get("alert_id"))
    if alert.false_positive:
        judged = IncidentAction.objects.filter(action="false_positive", alert=alert).order_by("at").first()
        when = f" at {rfc3339(judged.at)}" if judged else ""
        raise conflict(f"alert_id: alert {alert.pk} was already judged a false positive{when}")
    action = record(incident, user, "false_positive", at, body, replay_key, alert)
    decide(incident, user, Decision.Kind.FALSE_POSITIVE, [alert], at, action)
    Alert.objects.filter(pk=alert.pk).update(false_positive=True)
    correlation_run(key=incident.correlation_key)
    return Outcome([refreshed(incident)])


def _merge(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    into_id = body.get("into")
    if not isinstance(into_id, int) or isinstance(into_id, bool):
        raise invalid("into: expected the id of the incident to merge into")
    target = Incident.objects.filter(pk=into_id).first() if storable_id(into_id) else None
    if target is None:
        raise invalid(f"into: no incident {into_id}")
    if target.pk == incident.pk:
        raise conflict("into: an incident cannot be merged into itself")
    if target.correlation_key != incident.correlation_key:
        raise conflict(
            f"into: incident {target.pk} is in cluster {target.correlation_key!r}, "
            f"this one in {incident.correlation_key!r}"
        )
    target = Incident.objects.select_for_update().get(
        pk=target.pk
    )  # locked only once known to share this key's lock
    if target.merged_into_id:
        raise conflict(f"into: incident {target.pk} was itself merged into {target.merged_into_id}")
    alerts = list(Alert.objects.filter(incident__in=[incident, target]))
    action = record(incident, user, "merge", at, body, replay_key)
    decide(incident, user, Decision.Kind.MERGE, alerts, at, action)
    IncidentAction.objects.create(
        incident=target, action="merge", by=user if user.pk else None, at=at, body={"from": incident.pk}
    )
    save(incident, merged_into=target, **ranking_cleared(incident))
    Alert.objects.filter(incident=incident).update(incident=target)
    correlation_run(key=incident.correlation_key)
    return Outcome([refreshed(target)])


def _split(
    *, incident: Incident, user: User, body: dict[str, Any], at: datetime, replay_key: str | None
) -> Outcome:
    ids = body.get("alert_ids")
    if not isinstance(ids, list) or not ids:
        raise invalid("alert_ids: expected a non-empty list of alert ids")
    for index, value in enumerate(ids):
        if not isinstance(value, int) or isinstance(value, bool):
            raise invalid(f"alert_ids[{index}]: expected an alert id (integer)")
    found = Alert.objects.in_bulk(
        [value for value in set(ids) if storable_id(value)]
    )  # one query, however long the list
    for index, value in enumerate(ids):
        if value not in found:
            raise invalid(f"alert_ids[{index}]: no alert {value}")
        if found[value].incident_id != incident.pk:
            raise conflict(f"alert_ids[{index}]: alert {value} is not in incident {incident.pk}")
    alerts = [found[value] for value in dict.fromkeys(ids)]
    if len(alerts) == incident.alerts.count():
        raise conflict("alert_ids: that is every alert of the incident; nothing would be split off")
    members = list(incident.alerts.values_list("pk", flat=True))
    action = record(incident, user, "split", at, body, replay_key)
    decide(incident, user, Decision.Kind.SPLIT, alerts, at, action)
    correlation_run(key=incident.correlation_key)
    # The larger part keeps the incident's id, be it the part split off: answer every incident
    # that now holds one of its alerts, this one first.
    holders = set(Alert.objects.filter(pk__in=members).values_list("incident_id", flat=True)) - {
        None,
        incident.pk,
    }
    return Outcome([refreshed(incident), *Incident.objects.filter(pk__in=holders).order_by("pk")], split=True)


def refreshed(incident: Incident) -> Incident:
    return Incident.objects.get(pk=incident.pk)
