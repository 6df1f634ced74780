"""Postmortems: drafting, saving revisions and the review lifecycle (draft -> in review ->
published; `reopen` starts a new draft revision). Every change is a new revision, kept with its
author and time; a published revision is never changed. Each writes its audit record."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from incidents.models import Incident, Postmortem, PostmortemRevision
from incidents.postmortems.draft import draft_sections, gather_facts
from incidents.postmortems.policy import needs_postmortem
from incidents.services.audit import audit_record
from incidents.services.errors import conflict, forbidden, invalid, not_found
from incidents.services.roles import has_role, require_role

MAX_SECTION = 200_000  # characters of Markdown one section holds


def postmortem_of(incident: Incident) -> Postmortem | None:
    """The incident's postmortem, or that of an incident merged into it (followed after a merge)."""
    found = Postmortem.objects.filter(incidents=incident).order_by("pk").first()
    if found is None:
        found = Postmortem.objects.filter(incidents__merged_into=incident).order_by("pk").first()
    return found


def postmortem_draft(*, incident: Incident, user: User | None, via: str) -> tuple[Postmortem, bool]:
    """The incident's postmortem, drafted from facts if it has none: (postmortem, created). `user`
    None: the system drafting it when the incident resolved."""
    if user is not None:
        require_role(user, "responder")
    existing = postmortem_of(incident)
    if existing is not None:
        return existing, False
    facts = gather_facts([incident])  # outside the transaction: it may query Prometheus
    sections = draft_sections(facts)
    with transaction.atomic():
        locked = Incident.objects.select_for_update().get(pk=incident.pk)
        existing = postmortem_of(locked)
        if existing is not None:
            return existing, False
        postmortem = Postmortem.objects.create(title=f"Postmortem: {locked.title}"[:500])
        postmortem.incidents.add(locked)
        PostmortemRevision.objects.create(
            postmortem=postmortem, number=1, by=None, at=timezone.now(), sections=sections,
            figures=facts.figures, note="drafted from facts",
        )  # fmt: skip
        audit_record(
            by=user, via=via, target=postmortem, action="draft", field="status", old=None, new="draft"
        )
    return postmortem, True


def postmortem_save(*, postmortem: Postmortem, user: User, via: str, body: Any) -> Postmortem:
    """PATCH {"sections": [{"key", "markdown"}]}: a new revision with those sections replaced."""
    require_role(user, "responder")
    edits = _section_edits(body)
    with transaction.atomic():
        locked = Postmortem.objects.select_for_update().get(pk=postmortem.pk)
        if locked.status == Postmortem.Status.PUBLISHED:
            raise conflict("this postmortem is published: reopen it to change it")
        latest = locked.latest()
        known = {s["key"] for s in latest.sections}
        for key in edits:
            if key not in known:
                raise invalid(f"sections: no section {key!r}; this postmortem has {', '.join(sorted(known))}")
        now = timezone.now()
        sections = []
        for section in latest.sections:
            if section["key"] in edits and edits[section["key"]] != section["markdown"]:
                # A person who edits a stale section has seen the facts it was stale against.
                kept = {k: v for k, v in section.items() if k not in ("stale_facts", "fresh_facts")}
                section = {**kept, "markdown": edits[section["key"]], "edited_by": user.get_username(),
                           "edited_at": now.isoformat(), "stale": False,
                           "facts": section.get("fresh_facts", section.get("facts", {}))}  # fmt: skip
            sections.append(section)
        if sections == latest.sections:
            return locked
        _new_revision(locked, latest, user, sections, "edited")
        audit_record(by=user, via=via, target=locked, action="edit", field="sections", old=None,
                     new=sorted(edits), at=now)  # fmt: skip
    return Postmortem.objects.get(pk=postmortem.pk)


def postmortem_act(*, postmortem: Postmortem, user: User, via: str, body: Any) -> Postmortem:
    if not isinstance(body, dict) or not isinstance(body.get("action"), str):
        raise invalid(
            "body: expected {'action': 'submit' | 'approve' | 'publish' | 'reopen' | 'regenerate' | 'attach'}"
        )
    action = body["action"]
    handler = ACTIONS.get(action)
    if handler is None:
        raise invalid(f"action: {action!r} is not one of {', '.join(ACTIONS)}")
    require_role(user, "responder")
    return handler(postmortem, user, via, body)


def _submit(postmortem: Postmortem, user: User, via: str, body: dict) -> Postmortem:
    return _move(postmortem, user, via, "submit", {Postmortem.Status.DRAFT}, Postmortem.Status.IN_REVIEW)


def _approve(postmortem: Postmortem, user: User, via: str, body: dict) -> Postmortem:
    if not has_role(user, "author"):
        raise forbidden(f"approving needs the author role; {user.get_username()} has not")
    return _move(postmortem, user, via, "approve", {Postmortem.Status.IN_REVIEW}, Postmortem.Status.IN_REVIEW)


def _publish(postmortem: Postmortem, user: User, via: str, body: dict) -> Postmortem:
    if not has_role(user, "author"):
        raise forbidden(f"publishing needs the author role; {user.get_username()} has not")
    return _move(postmortem, user, via, "publish", {Postmortem.Status.IN_REVIEW}, Postmortem.Status.PUBLISHED)


def _reopen(postmortem: Postmortem, user: User, via: str, body: dict) -> Postmortem:
    return _move(postmortem, user, via, "reopen", {Postmortem.Status.PUBLISHED, Postmortem.Status.IN_REVIEW},
                 Postmortem.Status.DRAFT)  # fmt: skip


def _move(
    postmortem: Postmortem, user: User, via: str, action: str, allowed: set[str], to: str
) -> Postmortem:
    with transaction.atomic():
        locked = Postmortem.objects.select_for_update().get(pk=postmortem.pk)
        if locked.status not in allowed:
            raise conflict(
                f"{action}: the postmortem is {locked.status}; {action} needs it "
                f"{' or '.join(sorted(allowed))}"
            )
        if action == "approve" and settings.POSTMORTEM_FOUR_EYES and locked.submitted_by_id == user.pk:
            raise forbidden("ROOTLINE_POSTMORTEM_FOUR_EYES: someone other than who submitted it approves")
        if action == "publish" and locked.approved_by_id is None:
            raise conflict("approve it first (submit, approve, then publish)")
        now = timezone.now()
        old = locked.status
        latest = locked.latest()
        if action == "submit":
            locked.submitted_by, locked.submitted_at = user, now
            locked.approved_by, locked.approved_at = None, None
        elif action == "approve":
            locked.approved_by, locked.approved_at = user, now
        elif action == "publish":
            locked.published_by, locked.published_at = user, now
            latest.published = True
            latest.save(update_fields=["published"])
        elif action == "reopen":
            locked.submitted_by = locked.approved_by = None
            locked.submitted_at = locked.approved_at = None
            _new_revision(locked, latest, user, latest.sections, "reopened")
        locked.status = to
        locked.save()
        audit_record(by=user, via=via, target=locked, action=action, field="status", old=old, new=to, at=now)
    return Postmortem.objects.get(pk=postmortem.pk)


def _regenerate(postmortem: Postmortem, user: User, via: str, body: dict) -> Postmortem:
    """One section drafted again from fresh facts (and every figure computed again); the others kept."""
    key = body.get("section")
    if not isinstance(key, str):
        raise invalid("section: the key of the section to regenerate")
    if postmortem.status == Postmortem.Status.PUBLISHED:
        raise conflict("this postmortem is published: reopen it to change it")
    incidents = list(postmortem.incidents.order_by("started_at", "pk"))
    facts = gather_facts(incidents)
    fresh = {s["key"]: s for s in draft_sections(facts)}
    if key not in fresh:
        raise invalid(f"section: no section {key!r} in the template")
    with transaction.atomic():
        locked = Postmortem.objects.select_for_update().get(pk=postmortem.pk)
        latest = locked.latest()
        sections = [fresh[key] if s["key"] == key else s for s in latest.sections]
        if key not in {s["key"] for s in latest.sections}:
            sections.append(fresh[key])
        _new_revision(locked, latest, user, sections, f"regenerated {key}", figures=facts.figures)
        audit_record(
            by=user, via=via, target=locked, action="regenerate", field="sections", old=None, new=[key]
        )
    return Postmortem.objects.get(pk=postmortem.pk)


def _attach(postmortem: Postmortem, user: User, via: str, body: dict) -> Postmortem:
    incident_id = body.get("incident")
    if not isinstance(incident_id, int) or isinstance(incident_id, bool):
        raise invalid("incident: the id of the incident this postmortem also covers")
    incident = Incident.objects.filter(pk=incident_id).first()
    if incident is None:
        raise not_found(f"incident: no incident {incident_id}")
    other = incident.postmortems.exclude(pk=postmortem.pk).first()
    if other is not None:
        raise conflict(f"incident: incident {incident_id} already has postmortem {other.pk}")
    with transaction.atomic():
        postmortem.incidents.add(incident)
        audit_record(
            by=user, via=via, target=postmortem, action="attach", field="incidents", old=None, new=incident_id
        )
    return Postmortem.objects.get(pk=postmortem.pk)


ACTIONS = {
    "submit": _submit,
    "approve": _approve,
    "publish": _publish,
    "reopen": _reopen,
    "regenerate": _regenerate,
    "attach": _attach,
}


def _new_revision(
    postmortem: Postmortem, latest: PostmortemRevision, user: User | None, sections: list[dict], note: str,
    figures: list[dict] | None = None,
) -> PostmortemRevision:  # fmt: skip
    return PostmortemRevision.objects.create(
        postmortem=postmortem, number=latest.number + 1, by=user if user and user.pk else None,
        at=timezone.now(), sections=sections, note=note,
        figures=latest.figures if figures is None else figures,
    )  # fmt: skip


def _section_edits(body: Any) -> dict[str, str]:
    if not isinstance(body, dict) or not isinstance(body.get("sections"), list) or not body["sections"]:
        raise invalid("body: expected {'sections': [{'key': KEY, 'markdown': TEXT}, ...]}")
    unknown = sorted(set(body) - {"sections"})
    if unknown:
        raise invalid(f"body: unknown field(s) {unknown}; only 'sections' can be changed")
    edits: dict[str, str] = {}
    for index, item in enumerate(body["sections"]):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("key"), str)
            or not isinstance(item.get("markdown"), str)
        ):
            raise invalid(f"sections[{index}]: expected {{'key': text, 'markdown': text}}")
        text = item["markdown"]
        if len(text) > MAX_SECTION:
            raise invalid(
                f"sections[{index}].markdown: {len(text)} characters, over the limit of {MAX_SECTION}"
            )
        if "\x00" in text:
            raise invalid(f"sections[{index}].markdown: holds a NUL character")
        edits[item["key"]] = text
    return edits


def postmortems_due_on_resolve(incident_ids: Sequence[int]) -> list[int]:
    """Of incidents that just resolved, those the policy asks a postmortem of and that have none."""
    return [
        i.pk
        for i in Incident.objects.filter(
            pk__in=list(incident_ids), status=Incident.Status.RESOLVED, merged_into__isnull=True
        )  # fmt: skip
        if needs_postmortem(i) and postmortem_of(i) is None
    ]
