"""Remediation items: created (by authors, or suggested by the catalog from a postmortem's
matrix), changed (status, owner, deadline), checked against Prometheus after they are done, and
their owners reminded. Every change leaves its audit record (the item's `history`) and tells the
issue tracker's webhook."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from correlate.catalog import CatalogError, parse_duration
from correlate.ingest.common import FieldError, parse_time
from incidents import flow
from incidents.evidence.prometheus import PrometheusError, PrometheusSource
from incidents.models import Incident, Postmortem, RemediationItem
from incidents.selectors import seen_before
from incidents.services.audit import audit_record
from incidents.services.errors import forbidden, invalid
from incidents.services.mail import mail_send
from incidents.services.postmortem_authoring import postmortem_refresh_remediation
from incidents.services.postmortems import postmortem_draft
from incidents.services.roles import has_role, require_role
from incidents.services.tallies import REMEDIATION_CHECKS, REMEDIATION_CHECKS_FAILED, tally_add

Status = RemediationItem.Status
HORIZONS = {"24h": timedelta(hours=24), "1w": timedelta(days=7), "1m": timedelta(days=30)}
OPEN_STATES = (Status.OPEN, Status.IN_PROGRESS, Status.REGRESSED)
CHECKED_STATES = (Status.DONE, Status.VERIFIED)
EDITABLE = (
    "title",
    "owner",
    "horizon",
    "due_at",
    "verification",
    "check",
    "check_for",
    "status",
    "suggested",
)
PERSON_STATUSES = (Status.OPEN, Status.IN_PROGRESS, Status.DONE, Status.WONT_DO)
RANGE = re.compile(r"\[(\d+(?:\.\d+)?(?:ms|s|m|h|d|w|y))(?::[^\]]*)?\]")
MAX_TEXT = 10_000
FIELD_ATTRIBUTES = (
    ("title", "title"), ("verification", "verification"), ("check", "check_expr"), ("check_for", "check_for"),
    ("horizon", "horizon"), ("due_at", "due_at"),
)  # fmt: skip
BACKOFF_MAX = timedelta(hours=1)


def is_overdue(item: RemediationItem, now: datetime | None = None) -> bool:
    """Not done, verified or won't-do, and past due (a regressed item past due is overdue);
    suggestions are never overdue."""
    if item.suggested or item.status in (Status.DONE, Status.VERIFIED, Status.WONT_DO):
        return False
    return item.due_at < (now or timezone.now())


def longest_range(promql: str) -> timedelta:
    """The longest range selector or subquery range in a PromQL expression (`[7d]`, `[1h:5m]`)."""
    ranges = [parse_duration(found.replace("y", "d")) * (365 if found.endswith("y") else 1)
              for found in RANGE.findall(promql)]  # fmt: skip
    return max(ranges, default=timedelta(0))


# Creating and changing ----------------------------------------------------------------------


def remediation_create(
    *, incident: Incident, user: User | None, via: str, body: Any, suggested: bool = False,
    source: dict[str, Any] | None = None,
) -> RemediationItem:  # fmt: skip
    """An item for `incident`; `user` None: the system suggesting it."""
    if user is not None:
        require_role(user, "author")
    if not isinstance(body, dict):
        raise invalid("body: expected a JSON object with at least a 'title'")
    unknown = sorted(set(body) - {"title", "owner", "horizon", "due_at", "verification", "check", "check_for",
                                   "incident", "incidents"})  # fmt: skip
    if unknown:
        raise invalid(f"body: unknown field(s) {unknown}")
    values = _values(body, creating=True)
    now = timezone.now()
    horizon = values.get("horizon", RemediationItem.Horizon.WEEK)
    due = values.get("due_at") or (now + HORIZONS[horizon] if horizon in HORIZONS else None)
    if due is None:
        raise invalid("due_at: a horizon of 'date' needs a due_at")
    with transaction.atomic():
        item = RemediationItem.objects.create(
            incident=incident, title=values["title"], owner=values.get("owner"), horizon=horizon, due_at=due,
            verification=values.get("verification", ""), check_expr=values.get("check", ""),
            check_for=values.get("check_for", "0s"), suggested=suggested, source=source or {},
        )  # fmt: skip
        item.incidents.add(incident)
        detail = {"title": item.title, "suggested": suggested}
        audit_record(
            by=user,
            via=via,
            target=item,
            action="create",
            field="status",
            old=None,
            new=item.status,
            detail=detail,
        )
    flow.remediation_webhook_enqueue(item.pk, "created")
    if not suggested:
        postmortem_refresh_remediation(incidents=[incident.pk])
    return item


def remediation_update(*, item: RemediationItem, user: User, via: str, body: Any) -> RemediationItem:
    """PATCH: authors and admins change anything; a responder changes the status of an item they own."""
    if not isinstance(body, dict) or not body:
        raise invalid(f"body: expected a JSON object with any of {', '.join(EDITABLE)}")
    unknown = sorted(set(body) - set(EDITABLE))
    if unknown:
        raise invalid(f"body: unknown field(s) {unknown}; these can change: {', '.join(EDITABLE)}")
    if not has_role(user, "author"):
        require_role(user, "responder")
        if set(body) != {"status"} or item.owner_id != user.pk:
            raise forbidden(
                "a responder changes only the status of an item they own; editing needs the author role"
            )
    values = _values(body, creating=False)
    now = timezone.now()
    with transaction.atomic():
        locked = RemediationItem.objects.select_for_update().get(pk=item.pk)
        changes = _apply(locked, values, now)
        if not changes:
            return locked
        locked.save()
        for field, old, new in changes:
            audit_record(
                by=user, via=via, target=locked, action="update", field=field, old=old, new=new, at=now
            )
    flow.remediation_webhook_enqueue(item.pk, "changed")
    postmortem_refresh_remediation(incidents=list(item.incidents.values_list("pk", flat=True)))
    return RemediationItem.objects.get(pk=item.pk)


def _apply(item: RemediationItem, values: dict[str, Any], now: datetime) -> list[tuple[str, Any, Any]]:
    changes: list[tuple[str, Any, Any]] = []

    def put(field: str, attribute: str, new: Any, shown: Any = None) -> None:
        old = getattr(item, attribute)
        if old != new:
            changes.append((field, _shown(old), shown if shown is not None else _shown(new)))
            setattr(item, attribute, new)

    for field, attribute in FIELD_ATTRIBUTES:
        if field in values:
            put(field, attribute, values[field])
    if "horizon" in values and "due_at" not in values and values["horizon"] in HORIZONS:
        put("due_at", "due_at", item.created_at + HORIZONS[values["horizon"]])
    if "owner" in values:
        put("owner", "owner", values["owner"], values["owner"].get_username() if values["owner"] else None)
    if "suggested" in values:
        if values["suggested"] is True and not item.suggested:
            raise invalid("suggested: an accepted item cannot become a suggestion again")
        put("suggested", "suggested", values["suggested"])
    if "status" in values:
        status = values["status"]
        if status == Status.DONE and item.status != Status.DONE:
            put("done_at", "done_at", now)
            item.held_since, item.verified_at, item.next_check_at, item.check_failures = None, None, None, 0
        if status in (Status.OPEN, Status.IN_PROGRESS):
            put("done_at", "done_at", None)
        if status == Status.WONT_DO and item.suggested:
            put("suggested", "suggested", False)  # a rejected suggestion is a decision, no longer a proposal
        put("status", "status", status)
    return changes


def _values(body: dict[str, Any], *, creating: bool) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field in ("title", "verification", "check"):
        if field in body:
            value = body[field]
            if not isinstance(value, str) or len(value) > MAX_TEXT or "\x00" in value:
                raise invalid(f"{field}: expected text of at most {MAX_TEXT} characters")
            values[field] = value.strip()
    if creating and not values.get("title"):
        raise invalid("title: an item needs one")
    if "title" in values and not values["title"]:
        raise invalid("title: cannot be empty")
    if "check_for" in body:
        value = body["check_for"]
        try:
            parse_duration(value if isinstance(value, str) else "")
        except CatalogError:
            shown = str(value)[:40]
            raise invalid(
                f"check_for: expected a Prometheus duration such as 30m or 7d, got {shown!r}"
            ) from None
        values["check_for"] = value.strip()
    if "horizon" in body:
        if body["horizon"] not in RemediationItem.Horizon.values:
            raise invalid(f"horizon: expected one of {', '.join(RemediationItem.Horizon.values)}")
        values["horizon"] = body["horizon"]
    if "due_at" in body:
        try:
            values["due_at"] = parse_time(body["due_at"], "due_at")
        except FieldError as exc:
            raise invalid(str(exc)) from None
    if "owner" in body:
        name = body["owner"]
        if name is None or name == "":
            values["owner"] = None
        else:
            owner = (
                User.objects.filter(username=name, is_active=True).first() if isinstance(name, str) else None
            )
            if owner is None:
                raise invalid(f"owner: no active user {str(name)[:60]!r}")
            values["owner"] = owner
    if "status" in body:
        if body["status"] not in PERSON_STATUSES:
            shown = ", ".join(PERSON_STATUSES)
            raise invalid(f"status: expected one of {shown} (verified and regressed are set by the check)")
        values["status"] = body["status"]
    if "suggested" in body:
        if not isinstance(body["suggested"], bool):
            raise invalid("suggested: expected false (to accept the suggestion)")
        values["suggested"] = body["suggested"]
    return values


def _shown(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, User):
        return value.get_username()
    return value


# Checking against the data -------------------------------------------------------------------


def due_for_check(item: RemediationItem, now: datetime) -> bool:
    """A done or verified item with a check, once its data after the fix covers the query's range."""
    if item.suggested or item.status not in CHECKED_STATES or not item.check_expr or item.done_at is None:
        return False
    if item.next_check_at is not None and item.next_check_at > now:
        return False
    try:
        return now >= item.done_at + longest_range(item.check_expr)
    except CatalogError:
        return True  # a range Rootline cannot read: let Prometheus say what is wrong with it


def remediation_check(*, item: RemediationItem, now: datetime | None = None) -> RemediationItem:
    """Evaluate the item's check now and move it: held long enough -> verified; failing after it
    was verified -> regressed (its owner is told); empty -> stays done; no answer -> unchanged.
    Counted for /metrics: every check run, and those that could not evaluate."""
    now = now or timezone.now()
    outcome = evaluate(item.check_expr, now)
    tally_add(REMEDIATION_CHECKS)
    if outcome["ok"] is None:
        tally_add(REMEDIATION_CHECKS_FAILED)
    return remediation_judge(item=item, outcome=outcome, now=now)


def remediation_judge(*, item: RemediationItem, outcome: dict[str, Any], now: datetime) -> RemediationItem:
    """Move the item by a check's outcome (`evaluate`'s shape); the demo loader gives the outcomes
    its simulated morning would have had, as it has no Prometheus."""
    with transaction.atomic():
        locked = RemediationItem.objects.select_for_update().get(pk=item.pk)
        old = locked.status
        locked.last_check = outcome
        if outcome["ok"] is None:
            locked.check_failures += 1
            wait = min(timedelta(minutes=5) * (2 ** min(locked.check_failures, 10)), BACKOFF_MAX)
            locked.next_check_at = now + wait
        else:
            locked.check_failures, locked.next_check_at = 0, None
            _judge(locked, outcome["ok"], now)
        locked.save()
        if locked.status != old:
            audit_record(by=None, via="system", target=locked, action="check", field="status", old=old,
                         new=locked.status, detail={"query": outcome["query"], "result": outcome["result"]},
                         at=now)  # fmt: skip
    if locked.status != old:
        flow.remediation_webhook_enqueue(locked.pk, "changed")
        if locked.status == Status.REGRESSED:
            _tell_owner(locked, "regressed")
    return locked


def _judge(item: RemediationItem, held: bool, now: datetime) -> None:
    if held:
        item.held_since = item.held_since or now
        needed = parse_duration(item.check_for or "0s")
        if item.status in (Status.DONE, Status.REGRESSED) and now - item.held_since >= needed:
            item.status, item.verified_at = Status.VERIFIED, now
        return
    item.held_since = None
    if item.status == Status.VERIFIED:
        item.status = Status.REGRESSED


def evaluate(promql: str, now: datetime) -> dict[str, Any]:
    """`last_check`: {at, query, range, result, ok, reason}. ok True: the result is non-empty;
    False: evaluated and empty; None: could not evaluate (reason says why)."""
    check: dict[str, Any] = {
        "at": _shown(now),
        "query": promql,
        "range": None,
        "result": [],
        "ok": None,
        "reason": "",
    }
    try:
        check["range"] = str(int(longest_range(promql).total_seconds())) + "s"
    except CatalogError:
        pass
    if not settings.PROMETHEUS_URL:
        check["reason"] = "could not check: PROMETHEUS_URL is not set"
        return check
    source = PrometheusSource(settings.PROMETHEUS_URL)
    try:
        found = source.instant(promql, now.timestamp())
    except PrometheusError as exc:
        check["reason"] = f"could not check: {exc}"
        if exc.unreachable:
            check["unreachable"] = True
        return check
    finally:
        source.close()
    check["result"] = [{"labels": labels, "value": value} for labels, value in found[:50]]
    check["ok"] = bool(found)
    check["reason"] = "" if found else "condition not met (or no data)"
    return check


def remediation_check_due(*, now: datetime | None = None) -> list[int]:
    """The periodic check: every item due for one, checked; their ids."""
    now = now or timezone.now()
    checked = []
    for item in RemediationItem.objects.filter(status__in=CHECKED_STATES, suggested=False).exclude(
        check_expr=""
    ):
        if due_for_check(item, now):
            item = remediation_check(item=item, now=now)
            checked.append(item.pk)
            if (item.last_check or {}).get("unreachable"):
                break  # Prometheus down or drowning: the rest wait for the next round, not a timeout each
    return checked


# Reminders ------------------------------------------------------------------------------------


def reminder_state(item: RemediationItem, now: datetime) -> str:
    """'overdue', 'due_soon' (within 24 hours) or ''; with the due time, so a new deadline counts again."""
    if item.suggested or item.status in (Status.DONE, Status.VERIFIED, Status.WONT_DO):
        return ""
    if item.due_at < now:
        return f"overdue:{item.due_at.isoformat()}"
    if item.due_at - now <= timedelta(hours=24):
        return f"due_soon:{item.due_at.isoformat()}"
    return ""


def remediation_remind(*, now: datetime | None = None) -> list[int]:
    """Each owner hears once per state change: due within 24 hours, then overdue."""
    now = now or timezone.now()
    told = []
    candidates = RemediationItem.objects.filter(suggested=False, owner__isnull=False).exclude(
        status__in=(Status.DONE, Status.VERIFIED, Status.WONT_DO)
    ).filter(due_at__lte=now + timedelta(hours=24)).select_related("owner")  # fmt: skip
    for item in candidates:
        state = reminder_state(item, now)
        if not state or state == item.reminded:
            continue
        if _tell_owner(item, state.split(":", 1)[0]):
            RemediationItem.objects.filter(pk=item.pk).update(reminded=state)
            told.append(item.pk)
    return told


def _tell_owner(item: RemediationItem, state: str) -> bool:
    owner = item.owner
    if owner is None or not owner.email:
        return False
    words = {
        "due_soon": f"is due {item.due_at:%Y-%m-%d %H:%M} UTC",
        "overdue": f"was due {item.due_at:%Y-%m-%d %H:%M} UTC and is not done",
        "regressed": "was verified, and its check no longer holds",
    }[state]
    link = f"{settings.BASE_URL}/remediations/?owner={owner.get_username()}"
    mail_send(
        kind="remediation",
        subject=f"[Rootline] remediation {state.replace('_', ' ')}: {item.title[:120]}",
        message=f"{item.title}\n\n{words}.\nIncident #{item.incident_id}. "
        f"Verification: {item.verification or '-'}\n\n{link}\n",
        recipients=[owner.email],
    )  # fmt: skip
    return True


# Recurrence -----------------------------------------------------------------------------------


def remediation_note_recurrence(*, incident: Incident) -> list[int]:
    """A new incident whose chain signature matches an earlier incident's, on the same deployment or
    model: that incident's items record it in `recurred`. Their ids."""
    noted = []
    for earlier in seen_before(incident):
        for item in RemediationItem.objects.filter(incident=earlier).exclude(status=Status.WONT_DO):
            if incident.pk in item.recurred:
                continue
            item.recurred = [*item.recurred, incident.pk]
            item.save(update_fields=["recurred", "updated_at"])
            audit_record(by=None, via="system", target=item, action="recurred", field="recurred", old=None,
                         new=incident.pk)  # fmt: skip
            noted.append(item.pk)
    return noted


# Suggestions from the catalog ------------------------------------------------------------------


def postmortem_draft_suggesting(
    *, incident: Incident, user: User | None, via: str
) -> tuple[Postmortem, bool]:
    """`postmortem_draft`, and a new draft's remediation suggestions from its matrix: what the
    pages, the API, the task and the demo call when a postmortem is started."""
    postmortem, created = postmortem_draft(incident=incident, user=user, via=via)
    if created:
        remediation_suggest(postmortem_id=postmortem.pk, incident=incident)
    return postmortem, created


def remediation_suggest(*, postmortem_id: int, incident: Incident) -> list[RemediationItem]:
    """The catalog's remediations for the incident's failure modes, in each matrix column where the
    matrix has something to say for the mode's layer; each a suggestion (`suggested: true`) for a
    person to accept, edit or reject. Not twice the same title for one incident."""
    from incidents.catalog import catalog as app_catalog
    from incidents.timeline import incident_matrix

    catalog = app_catalog()
    said = {(row["layer"], column) for row in incident_matrix(incident) for column in ("direct_cause",
            "system_defect", "process_gap") if (row.get(column) or {}).get("text")}  # fmt: skip
    taken = set(RemediationItem.objects.filter(incident=incident).values_list("title", flat=True))
    made = []
    for mode in dict.fromkeys(incident.failure_modes or []):
        layer = catalog.mode_layer(mode)
        for column in ("direct_cause", "system_defect", "process_gap"):
            if (layer, column) not in said and (column != "process_gap" or ("process", column) not in said):
                continue
            for template in catalog.remediations_for(mode, column):
                if template.title in taken:
                    continue
                taken.add(template.title)
                body = {
                    "title": template.title,
                    "horizon": template.horizon,
                    "verification": template.verification,
                    "check": template.check or "",
                    "check_for": template.check_for or "0s",
                }
                source = {"postmortem": postmortem_id, "layer": layer, "column": column, "mode": mode}
                item = remediation_create(
                    incident=incident, user=None, via="system", body=body, suggested=True, source=source
                )
                made.append(item)
    return made
