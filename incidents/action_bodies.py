"""An incident action as the API, the page's forms and import lines write it (`{"action", "at",
...fields}`), read into a call of its typed service (`incidents/services/incidents.py`). What a
body gets wrong in itself, whatever the incident, is refused here: not an object, an unknown
action, a field the action does not take (a misspelt `at` would otherwise date the action now),
a text PostgreSQL cannot store, a bad or future `at`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User

from correlate.ingest.common import FieldError, parse_time
from incidents.models import Incident
from incidents.services import incidents as actions
from incidents.services.errors import invalid
from incidents.services.roles import require_role

SERVICES: dict[str, Callable[..., actions.Outcome]] = {
    "acknowledge": actions.incident_acknowledge,
    "assign": actions.incident_assign,
    "note": actions.incident_note,
    "severity": actions.incident_set_severity,
    "resolve": actions.incident_resolve,
    "reopen": actions.incident_reopen,
    "mitigate": actions.incident_mitigate,
    "merge": actions.incident_merge,
    "split": actions.incident_split,
    "exclude_alert": actions.incident_exclude_alert,
    "false_positive": actions.incident_mark_false_positive,
    "degrade": actions.incident_set_degradation,
    "refresh_evidence": actions.incident_refresh_evidence,
}
INCIDENT_ACTIONS = tuple(SERVICES)
# The fields each action takes besides `action` and `at`, named as its service's keywords.
ACTION_FIELDS = {
    "acknowledge": (),
    "assign": ("username",),
    "note": ("text",),
    "severity": ("level",),
    "resolve": (),
    "reopen": (),
    "mitigate": (),
    "merge": ("into",),
    "split": ("alert_ids",),
    "exclude_alert": ("alert_id",),
    "false_positive": ("alert_id",),
    "degrade": ("level",),
    "refresh_evidence": (),
}


@dataclass(frozen=True)
class ActionCall:
    action: str
    at: datetime | None
    fields: dict[str, Any]

    def apply(
        self, *, incident: Incident, user: User, via: str, idempotency_key: str | None = None
    ) -> actions.Outcome:
        return SERVICES[self.action](
            incident=incident, user=user, via=via, at=self.at, idempotency_key=idempotency_key, **self.fields
        )


def incident_act_on_body(
    *, incident: Incident, user: User, via: str, body: Any, idempotency_key: str | None = None
) -> actions.Outcome:
    """The role first (a viewer is told so whatever the body), then the body, then the service."""
    require_role(user, "responder")
    return action_call(body).apply(incident=incident, user=user, via=via, idempotency_key=idempotency_key)


def action_call(body: Any) -> ActionCall:
    if not isinstance(body, dict):
        raise invalid("body: expected a JSON object with an 'action'")
    action = body.get("action")
    if action not in INCIDENT_ACTIONS:
        raise invalid(f"action: expected one of {', '.join(INCIDENT_ACTIONS)}, got {str(action)[:40]!r}")
    unknown = sorted(
        name if name.isprintable() and len(name) <= 40 else repr(name[:40])
        for name in map(str, body)
        if name not in ("action", "at", *ACTION_FIELDS[action])
    )
    if unknown:
        takes = ", ".join(("at", *ACTION_FIELDS[action]))
        raise invalid(f"{unknown[0]}: not a field of {action}, which takes {takes}")
    for name in ACTION_FIELDS[action]:
        for value in body[name] if isinstance(body.get(name), list) else [body.get(name)]:
            problem = unstorable(value)
            if problem:
                raise invalid(f"{name}: {problem}")
    return ActionCall(action, action_time(body), {name: body.get(name) for name in ACTION_FIELDS[action]})


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


def action_time(body: dict) -> datetime | None:
    """The action's `at`, or None for now."""
    if body.get("at") in (None, ""):
        return None
    try:
        moment = parse_time(body["at"], "at")
    except FieldError as exc:
        raise invalid(str(exc)) from None
    if moment is None:
        raise invalid("at: zero time")
    actions.not_in_the_future(moment)
    return moment
