"""Routes: webhooks, the REST API, pages, health and metrics."""

from django.contrib import admin
from django.urls import include, path, re_path

from incidents import (
    account_views,
    evidence_views,
    postmortem_views,
    remediation_views,
    review_views,
    runbooks,
    views,
)
from incidents.api import urls as api_urls
from incidents.api.views import no_such_route

urlpatterns = [
    path("hooks/<str:kind>/<int:integration_id>/", views.webhook, name="webhook"),
    path("api/v1/", include(api_urls)),
    re_path(r"^api/", no_such_route, name="api-no-such-route"),  # after every API route: a JSON 404
    path("accounts/profile/", account_views.profile_page, name="profile"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", views.metrics, name="metrics"),
    path("incidents/<int:incident_id>/", views.incident_page, name="incident"),
    path("incidents/<int:incident_id>/evidence/", evidence_views.evidence_page, name="incident-evidence"),
    path("assets/plotly-<str:version>.min.js", evidence_views.plotly_js, name="plotly-js"),
    path("assets/plotly-<str:version>.css", evidence_views.plotly_css, name="plotly-css"),
    path("incidents/<int:incident_id>/act/", views.incident_act_form, name="incident-act"),
    path(
        "incidents/<int:incident_id>/postmortem/",
        postmortem_views.postmortem_page,
        name="incident-postmortem",
    ),
    path(
        "incidents/<int:incident_id>/postmortem/print/",
        postmortem_views.postmortem_print,
        name="incident-postmortem-print",
    ),
    path(
        "incidents/<int:incident_id>/postmortem/act/",
        postmortem_views.postmortem_act_form,
        name="incident-postmortem-act",
    ),
    path(
        "incidents/<int:incident_id>/postmortem/save/",
        postmortem_views.postmortem_save_form,
        name="incident-postmortem-save",
    ),
    path(
        "incidents/<int:incident_id>/postmortem/preview/",
        postmortem_views.postmortem_preview,
        name="incident-postmortem-preview",
    ),
    path(
        "incidents/<int:incident_id>/postmortem/diff/",
        postmortem_views.postmortem_diff,
        name="incident-postmortem-diff",
    ),
    path(
        "incidents/<int:incident_id>/postmortem/comment/",
        postmortem_views.postmortem_comment_form,
        name="incident-postmortem-comment",
    ),
    path("postmortems/", postmortem_views.postmortem_list, name="postmortems"),
    path("remediations/", remediation_views.remediation_page, name="remediations"),
    path("remediations/<int:item_id>/act/", remediation_views.remediation_act_form, name="remediation-act"),
    path("review/", review_views.review_page, name="review"),
    path("alerts/", views.alerts_page, name="alerts"),
    path("runbooks/<str:alertname>/", runbooks.runbook_page, name="runbook"),
    path("", views.home, name="home"),
]
