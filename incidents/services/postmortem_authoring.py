"""What authors do to a postmortem besides its lifecycle: comments on a section, and keeping the
draft true to fresh facts without overwriting what a person wrote.

When the facts change (new evidence, more alerts), the machine's own sections are drafted again;
a section a person edited is never overwritten: it is marked stale, with the facts that changed
(each placeholder's text then and now), until someone regenerates it or edits it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from incidents.models import Postmortem, PostmortemComment
from incidents.postmortems.draft import draft_sections, gather_facts
from incidents.services.audit import audit_record
from incidents.services.errors import invalid
from incidents.services.postmortems import _new_revision
from incidents.services.roles import require_role

MAX_COMMENT = 10_000


def postmortem_comment_add(
    *, postmortem: Postmortem, user: User, via: str, section: str, text: str
) -> PostmortemComment:
    require_role(user, "responder")
    text = text.strip()
    if not text:
        raise invalid("text: a comment needs words")
    if len(text) > MAX_COMMENT or "\x00" in text:
        raise invalid(f"text: at most {MAX_COMMENT} characters, no NUL")
    keys = {s["key"] for s in postmortem.latest().sections}
    if section not in keys:
        raise invalid(f"section: no section {section!r}; this postmortem has {', '.join(sorted(keys))}")
    with transaction.atomic():
        comment = PostmortemComment.objects.create(
            postmortem=postmortem, section=section, by=user, at=timezone.now(), text=text
        )
        audit_record(by=user, via=via, target=postmortem, action="comment", field="comments", old=None,
                     new=section)  # fmt: skip
    return comment


def postmortem_refresh_facts(*, postmortem: Postmortem) -> bool:
    """Draft the sections again from fresh facts: the machine's sections take the new text, a
    person's edited section whose facts changed is marked stale. True when a revision was saved."""
    if postmortem.status == Postmortem.Status.PUBLISHED:
        return False
    incidents = list(postmortem.incidents.order_by("started_at", "pk"))
    if not incidents:
        return False
    facts = gather_facts(incidents)
    fresh = {s["key"]: s for s in draft_sections(facts)}
    with transaction.atomic():
        locked = Postmortem.objects.select_for_update().get(pk=postmortem.pk)
        if locked.status == Postmortem.Status.PUBLISHED:
            return False
        latest = locked.latest()
        sections = [refreshed_section(section, fresh.get(section["key"])) for section in latest.sections]
        if sections == latest.sections:
            return False
        _new_revision(locked, latest, None, sections, "facts refreshed", figures=facts.figures)
    return True


def refreshed_section(section: dict[str, Any], fresh: dict[str, Any] | None) -> dict[str, Any]:
    if fresh is None:
        return section
    if not section.get("edited_by"):
        return {**fresh, "stale": False} if fresh["markdown"] != section["markdown"] else section
    changed = {
        name: {"was": section.get("facts", {}).get(name, ""), "now": value}
        for name, value in fresh.get("facts", {}).items()
        if section.get("facts", {}).get(name) != value
    }
    if not changed:
        return section
    return {**section, "stale": True, "stale_facts": changed, "fresh_facts": fresh.get("facts", {})}


def postmortems_refresh_for(incident_ids: Sequence[int]) -> int:
    """After an incident's facts changed: refresh each unpublished postmortem covering it."""
    refreshed = 0
    for postmortem in (
        Postmortem.objects.filter(incidents__in=list(incident_ids))
        .exclude(status=Postmortem.Status.PUBLISHED)
        .distinct()
    ):
        refreshed += postmortem_refresh_facts(postmortem=postmortem)
    return refreshed


def postmortem_refresh_remediation(*, incidents: Sequence[int]) -> int:
    """The remediation items of these incidents changed: each unpublished postmortem covering them
    has its remediation table drafted again (a person's edited section turns stale instead)."""
    from incidents.postmortems.draft import remediation_rows

    refreshed = 0
    for postmortem in (
        Postmortem.objects.filter(incidents__in=list(incidents))
        .exclude(status=Postmortem.Status.PUBLISHED)
        .distinct()
    ):
        table = remediation_rows(list(postmortem.incidents.all()))
        with transaction.atomic():
            locked = Postmortem.objects.select_for_update().get(pk=postmortem.pk)
            latest = locked.latest()
            sections = [_with_table(s, table) for s in latest.sections]
            if sections != latest.sections:
                _new_revision(locked, latest, None, sections, "remediation items changed")
                refreshed += 1
    return refreshed


def _with_table(section: dict[str, Any], table: str) -> dict[str, Any]:
    old = section.get("facts", {}).get("remediation_table")
    if old is None or old == table:
        return section
    if section.get("edited_by"):
        return refreshed_section(
            section, {**section, "facts": {**section["facts"], "remediation_table": table}}
        )
    return {**section, "markdown": section["markdown"].replace(old, table), "facts": {**section["facts"],
            "remediation_table": table}}  # fmt: skip
