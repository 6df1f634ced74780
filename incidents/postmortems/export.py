"""A postmortem revision as one Markdown document and as the API's JSON."""

from __future__ import annotations

from typing import Any

from incidents.models import Postmortem, PostmortemRevision
from incidents.postmortems.policy import due_at


def revision_markdown(revision: PostmortemRevision) -> str:
    """The sections in template order, joined; the Markdown `postmortem.md` serves."""
    return "\n\n".join(section["markdown"].strip() for section in revision.sections).strip() + "\n"


def shown_revision(postmortem: Postmortem) -> PostmortemRevision:
    """What `postmortem.md` serves: the latest published revision, else the latest draft."""
    return postmortem.latest_published() or postmortem.latest()


def postmortem_payload(postmortem: Postmortem, revision: PostmortemRevision | None = None) -> dict[str, Any]:
    revision = revision or postmortem.latest()
    incidents = list(postmortem.incidents.order_by("pk"))
    due = due_at(postmortem, incidents)
    return {
        "id": postmortem.pk,
        "incidents": [incident.pk for incident in incidents],
        "status": postmortem.status,
        "title": postmortem.title,
        "sections": [
            {
                "key": s["key"],
                "title": s["title"],
                "markdown": s["markdown"],
                "stale": bool(s.get("stale", False)),
                "edited_by": s.get("edited_by"),
                "edited_at": s.get("edited_at"),
            }
            for s in revision.sections
        ],
        "figures": revision.figures,
        "revision": revision.number,
        "submitted_by": _name(postmortem.submitted_by),
        "approved_by": _name(postmortem.approved_by),
        "published_at": postmortem.published_at.isoformat().replace("+00:00", "Z")
        if postmortem.published_at
        else None,
        "published_by": _name(postmortem.published_by),
        "due_at": due.isoformat().replace("+00:00", "Z") if due else None,
    }


def _name(user) -> str | None:
    return user.get_username() if user is not None else None
