"""The admin site for Rootline's admin role: a user in the `admin` group enters it as a superuser
does (Django's own site asks for `is_staff`, which the roles do not set), and sees every model of
Rootline's (`incidents/admin.py` gives the role view permission)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from incidents.services.roles import has_role


class RootlineAdminSite(admin.AdminSite):
    site_header = "Rootline admin"
    site_title = "Rootline admin"

    def has_permission(self, request: HttpRequest) -> bool:
        user = request.user
        return bool(user.is_active and user.is_authenticated and has_role(user, "admin"))
