"""A person's own settings: `/accounts/profile/`, where they choose the time zone their pages use."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from incidents.models import AuditRecord
from incidents.services.errors import RootlineError
from incidents.services.people import profile_set_time_zone, time_zone_names
from incidents.services.roles import acting_user, role_of
from rootline.middleware import TimeZoneMiddleware


@login_required
def profile_page(request: HttpRequest) -> HttpResponse:
    user = acting_user(request.user)
    if request.method == "POST":
        try:
            profile = profile_set_time_zone(
                user=user, via=AuditRecord.Via.PAGE, time_zone=request.POST.get("time_zone", "")
            )
        except RootlineError as exc:
            messages.error(request, exc.message)
        else:
            request.session[TimeZoneMiddleware.SESSION_KEY] = profile.time_zone
            messages.success(request, f"times are shown in {profile.time_zone} from now on")
        return redirect("profile")
    return render(
        request,
        "registration/profile.html",
        {
            "time_zones": sorted(time_zone_names()),
            "current": timezone.get_current_timezone_name(),  # the middleware read it for this page
            "role": role_of(user),
        },
    )
