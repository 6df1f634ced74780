"""`/remediations/`: mine, overdue, due this week, all (and suggestions), filtered by the URL; the
forms accept or reject a suggestion, set the owner, move the status and check an item now."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from incidents.models import AuditRecord, RemediationItem
from incidents.selectors import assignable_users
from incidents.services.errors import RootlineError
from incidents.services.remediation import is_overdue, remediation_check, remediation_update
from incidents.services.roles import acting_user, has_role, require_role

TABS = ("mine", "overdue", "week", "all", "suggested")
DONE_STATES = ("done", "verified", "wont_do")


@login_required
def remediation_page(request: HttpRequest) -> HttpResponse:
    tab = request.GET.get("tab", "mine")
    tab = tab if tab in TABS else "mine"
    status = request.GET.get("status", "")
    owner = request.GET.get("owner", "")[:150]
    now = timezone.now()
    items = RemediationItem.objects.select_related("owner", "incident").order_by("due_at", "id")
    items = items.filter(suggested=(tab == "suggested"))
    if tab == "mine":
        items = items.filter(owner=acting_user(request.user))
    elif tab == "overdue":
        items = items.filter(due_at__lt=now).exclude(status__in=DONE_STATES)
    elif tab == "week":
        items = items.filter(due_at__gte=now, due_at__lt=now + timedelta(days=7)).exclude(
            status__in=DONE_STATES
        )
    if status in RemediationItem.Status.values:
        items = items.filter(status=status)
    if owner:
        items = items.filter(owner__username=owner)
    rows = [{"item": item, "overdue": is_overdue(item, now)} for item in items[:500]]
    can_edit = has_role(request.user, "author")
    return render(request, "incidents/remediations.html", {
        "rows": rows, "tab": tab, "tabs": TABS, "status": status, "owner": owner,
        "statuses": RemediationItem.Status.choices, "can_edit": can_edit,
        "can_act": has_role(request.user, "responder"),
        "people": assignable_users() if can_edit else [],
    })  # fmt: skip


@login_required
@require_POST
def remediation_act_form(request: HttpRequest, item_id: int) -> HttpResponse:
    item = get_object_or_404(RemediationItem, pk=item_id)
    user = acting_user(request.user)
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = "/remediations/"
    action = request.POST.get("action", "")
    try:
        if action == "check":
            require_role(user, "responder")
            remediation_check(item=item)
            messages.success(request, "checked")
        else:
            body: dict[str, object] = {}
            if action == "accept":
                body = {"suggested": False}
            elif action == "reject":
                body = {"status": "wont_do"}
            elif action == "owner":
                body = {"owner": request.POST.get("owner", "")}
            elif action == "status":
                body = {"status": request.POST.get("status", "")}
            remediation_update(item=item, user=user, via=AuditRecord.Via.PAGE, body=body)
            messages.success(request, f"{action} recorded")
    except RootlineError as exc:
        messages.error(request, exc.message)
    return redirect(back)
