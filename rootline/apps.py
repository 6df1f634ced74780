"""Django's admin, with Rootline's site (`rootline/admin_site.py`), loaded once the apps are."""

from django.contrib.admin.apps import AdminConfig


class RootlineAdminConfig(AdminConfig):
    default_site = "rootline.admin_site.RootlineAdminSite"
