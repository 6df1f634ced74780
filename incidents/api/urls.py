from django.urls import path

from incidents.api import (
    audit_views,
    evidence_views,
    forecast_views,
    postmortem_views,
    remediation_views,
    review_views,
    views,
)

urlpatterns = [
    path("alerts/", views.AlertList.as_view(), name="api-alerts"),
    path("incidents/", views.IncidentList.as_view(), name="api-incidents"),
    path("incidents/<int:incident_id>/", views.IncidentDetail.as_view(), name="api-incident"),
    path(
        "incidents/<int:incident_id>/actions/", views.IncidentActions.as_view(), name="api-incident-actions"
    ),
    path(
        "incidents/<int:incident_id>/timeline/",
        evidence_views.IncidentTimeline.as_view(),
        name="api-incident-timeline",
    ),
    path(
        "incidents/<int:incident_id>/next/", forecast_views.IncidentNext.as_view(), name="api-incident-next"
    ),
    path(
        "incidents/<int:incident_id>/matrix/",
        evidence_views.IncidentMatrix.as_view(),
        name="api-incident-matrix",
    ),
    path(
        "incidents/<int:incident_id>/postmortem.md",
        postmortem_views.IncidentPostmortemMarkdown.as_view(),
        name="api-incident-postmortem-md",
    ),
    path(
        "incidents/<int:incident_id>/postmortem/",
        postmortem_views.IncidentPostmortem.as_view(),
        name="api-incident-postmortem",
    ),
    path("postmortems/", postmortem_views.PostmortemList.as_view(), name="api-postmortems"),
    path(
        "postmortems/<int:postmortem_id>/", postmortem_views.PostmortemDetail.as_view(), name="api-postmortem"
    ),
    path(
        "postmortems/<int:postmortem_id>/revisions/",
        postmortem_views.PostmortemRevisions.as_view(),
        name="api-postmortem-revisions",
    ),
    path(
        "postmortems/<int:postmortem_id>/revisions/<int:number>/",
        postmortem_views.PostmortemRevisionDetail.as_view(),
        name="api-postmortem-revision",
    ),
    path(
        "postmortems/<int:postmortem_id>/actions/",
        postmortem_views.PostmortemActions.as_view(),
        name="api-postmortem-actions",
    ),
    path("remediations/", remediation_views.RemediationList.as_view(), name="api-remediations"),
    path(
        "remediations/<int:item_id>/", remediation_views.RemediationDetail.as_view(), name="api-remediation"
    ),
    path(
        "remediations/<int:item_id>/check/",
        remediation_views.RemediationCheck.as_view(),
        name="api-remediation-check",
    ),
    path("review/", review_views.ReviewJson.as_view(), name="api-review"),
    path("review.md", review_views.ReviewMarkdown.as_view(), name="api-review-md"),
    path("review.csv", review_views.ReviewCsv.as_view(), name="api-review-csv"),
    path("audit/", audit_views.AuditList.as_view(), name="api-audit"),
    path("schema/", views.SchemaView.as_view(), name="api-schema"),
]
