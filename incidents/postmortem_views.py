"""The postmortem's pages: `/incidents/ID/postmortem/` (the latest revision rendered, its figures
and revisions, the review's buttons) and its print view; the forms post to the same services as
the API."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from incidents.evidence_views import chart_context
from incidents.markdown import markdown_html
from incidents.models import AuditRecord, Incident, PostmortemRevision
from incidents.postmortems.export import postmortem_payload, shown_revision
from incidents.services.errors import RootlineError
from incidents.services.postmortems import due_at, postmortem_act, postmortem_draft, postmortem_of
from incidents.services.roles import acting_user, has_role
from incidents.timeline import incident_evidence

PAGE_ACTIONS = ("submit", "approve", "publish", "reopen")


def _page(incident: Incident, revision: PostmortemRevision | None = None) -> dict:
    postmortem = postmortem_of(incident)
    if postmortem is None:
        return {"incident": incident, "postmortem": None}
    shown = revision or postmortem.latest()
    return {
        "incident": incident,
        "postmortem": postmortem,
        "payload": postmortem_payload(postmortem, shown),
        "revision": shown,
        "sections": [{**section, "html": markdown_html(section["markdown"])} for section in shown.sections],
        "impact_figures": shown.figures,
        "revisions": list(postmortem.revisions.select_related("by").order_by("-number")),
        "due_at": due_at(postmortem),
    }


@login_required
def postmortem_page(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=incident_id)
    page = _page(incident)
    page["can_act"] = has_role(request.user, "responder")
    page["can_approve"] = has_role(request.user, "author")
    return render(request, "incidents/postmortem.html", page)


@login_required
def postmortem_print(request: HttpRequest, incident_id: int) -> HttpResponse:
    """Every section rendered on the server, laid out for paper (A4 and Letter): the published
    revision, else the draft."""
    incident = get_object_or_404(Incident, pk=incident_id)
    postmortem = postmortem_of(incident)
    if postmortem is None:
        raise Http404(f"incident {incident_id} has no postmortem")
    evidence = incident_evidence(incident)
    page = {**_page(incident, shown_revision(postmortem)), **chart_context(evidence, evidence.timeline())}
    return render(request, "incidents/postmortem_print.html", page)


@login_required
@require_POST
def postmortem_act_form(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=incident_id)
    action = request.POST.get("action", "")
    user = acting_user(request.user)
    try:
        if action == "draft":
            _, created = postmortem_draft(incident=incident, user=user, via=AuditRecord.Via.PAGE)
            messages.success(request, "postmortem drafted from facts" if created else "it already had one")
        else:
            postmortem = postmortem_of(incident)
            if postmortem is None or action not in PAGE_ACTIONS:
                raise Http404("no such postmortem action")
            postmortem_act(
                postmortem=postmortem, user=user, via=AuditRecord.Via.PAGE, body={"action": action}
            )
            messages.success(request, f"{action} recorded")
    except RootlineError as exc:
        messages.error(request, exc.message)
    return redirect("incident-postmortem", incident_id=incident.pk)
