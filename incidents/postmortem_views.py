"""The postmortem's pages: `/incidents/ID/postmortem/` (each section rendered, and while it is a
draft edited as Markdown with a preview and autosave; its comments, stale marks, revisions and
their diff, the review's buttons), its print view, and `/postmortems/` (all of them). The forms
and the editor's saves go to the same services as the API."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import OuterRef, Subquery
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from incidents.evidence_views import chart_context
from incidents.markdown import markdown_html
from incidents.models import AuditRecord, Incident, Postmortem, PostmortemComment, PostmortemRevision
from incidents.postmortems.diff import revision_diff
from incidents.postmortems.export import postmortem_payload, shown_revision
from incidents.postmortems.policy import due_at
from incidents.services.errors import RootlineError
from incidents.services.postmortem_authoring import postmortem_comment_add
from incidents.services.postmortems import (
    MAX_SECTION,
    postmortem_act,
    postmortem_of,
    postmortem_save,
)
from incidents.services.remediation import postmortem_draft_suggesting
from incidents.services.roles import acting_user, has_role
from incidents.timeline import incident_evidence

PAGE_ACTIONS = ("submit", "approve", "publish", "reopen", "regenerate")


def _page(incident: Incident, revision: PostmortemRevision | None = None) -> dict:
    postmortem = postmortem_of(incident)
    if postmortem is None:
        return {"incident": incident, "postmortem": None}
    shown = revision or postmortem.latest()
    comments: dict[str, list[PostmortemComment]] = {}
    for comment in postmortem.comments.select_related("by").order_by("at", "id"):
        comments.setdefault(comment.section, []).append(comment)
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
            _, created = postmortem_draft_suggesting(incident=incident, user=user, via=AuditRecord.Via.PAGE)
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


@login_required
@require_POST
def postmortem_save_form(request: HttpRequest, incident_id: int) -> JsonResponse:
    """The editor's autosave: {"sections": [{"key", "markdown"}]} as JSON, a new revision each time
    the text changed (the page sends at most one every few seconds while a person types)."""
    incident = get_object_or_404(Incident, pk=incident_id)
    postmortem = postmortem_of(incident)
    if postmortem is None:
        return JsonResponse({"error": f"incident {incident_id} has no postmortem"}, status=404)
    try:
        body = json.loads(request.body or b"null")
        user = acting_user(request.user)
        saved = postmortem_save(postmortem=postmortem, user=user, via=AuditRecord.Via.PAGE, body=body)
    except ValueError:
        return JsonResponse({"error": "body: expected JSON"}, status=400)
    except RootlineError as exc:
        return JsonResponse({"error": exc.message}, status=exc.http_status)
    latest = saved.latest()
    return JsonResponse({"revision": latest.number, "at": latest.at.isoformat()})


@login_required
@require_POST
def postmortem_preview(request: HttpRequest, incident_id: int) -> HttpResponse:
    """A section's Markdown rendered and sanitised as the page shows it (the editor's live preview)."""
    get_object_or_404(Incident, pk=incident_id)
    source = request.POST.get("markdown", "")[:MAX_SECTION].replace("\x00", "")
    return HttpResponse(markdown_html(source))


@login_required
def postmortem_diff(request: HttpRequest, incident_id: int) -> HttpResponse:
    """Two revisions side by side, section by section; by default the machine's draft against the
    latest, which is what people changed."""
    incident = get_object_or_404(Incident, pk=incident_id)
    postmortem = postmortem_of(incident)
    if postmortem is None:
        raise Http404(f"incident {incident_id} has no postmortem")
    numbers = list(postmortem.revisions.order_by("number").values_list("number", flat=True))
    older = _revision_number(request.GET.get("a"), numbers[0])
    newer = _revision_number(request.GET.get("b"), numbers[-1])
    revisions = {
        r.number: r for r in postmortem.revisions.filter(number__in=[older, newer]).select_related("by")
    }
    if older not in revisions or newer not in revisions:
        raise Http404("no such revision")
    return render(request, "incidents/postmortem_diff.html", {
        "incident": incident, "postmortem": postmortem, "numbers": numbers, "a": revisions[older],
        "b": revisions[newer], "sections": revision_diff(revisions[older], revisions[newer]),
    })  # fmt: skip


def _revision_number(raw: str | None, default: int) -> int:
    return int(raw) if raw and raw.isascii() and raw.isdigit() and len(raw) < 9 else default


@login_required
@require_POST
def postmortem_comment_form(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=incident_id)
    postmortem = postmortem_of(incident)
    if postmortem is None:
        raise Http404(f"incident {incident_id} has no postmortem")
    try:
        postmortem_comment_add(
            postmortem=postmortem, user=acting_user(request.user), via=AuditRecord.Via.PAGE,
            section=request.POST.get("section", ""), text=request.POST.get("text", ""),
        )  # fmt: skip
        messages.success(request, "comment added")
    except RootlineError as exc:
        messages.error(request, exc.message)
    return redirect(f"{reverse('incident-postmortem', kwargs={'incident_id': incident.pk})}#section-"
                    f"{request.POST.get('section', '')[:100]}")  # fmt: skip


@login_required
def postmortem_list(request: HttpRequest) -> HttpResponse:
    """Every postmortem with its status, due time, author and incidents; filters in the URL."""
    status = request.GET.get("status", "")
    last_by = PostmortemRevision.objects.filter(postmortem=OuterRef("pk")).order_by("-number")
    found = (
        Postmortem.objects.prefetch_related("incidents")
        .annotate(
            last_by=Subquery(last_by.values("by__username")[:1]),
            revision=Subquery(last_by.values("number")[:1]),
        )
        .order_by("-created_at", "-id")
    )
    if status in Postmortem.Status.values:
        found = found.filter(status=status)
    overdue_only = request.GET.get("overdue") == "1"
    now = timezone.now()
    rows = []
    for postmortem in found[:500]:
        incidents = list(postmortem.incidents.all())
        due = due_at(postmortem, incidents)
        late = bool(due and due < now and postmortem.status != Postmortem.Status.PUBLISHED)
        if overdue_only and not late:
            continue
        rows.append({"postmortem": postmortem, "incidents": incidents, "due": due, "overdue": late})
    return render(request, "incidents/postmortems.html", {
        "rows": rows, "status": status if status in Postmortem.Status.values else "", "overdue": overdue_only,
        "statuses": Postmortem.Status.choices,
    })  # fmt: skip
