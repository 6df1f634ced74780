from django.urls import path

from incidents.api import audit_views, evidence_views, views

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
        "incidents/<int:incident_id>/matrix/",
        evidence_views.IncidentMatrix.as_view(),
        name="api-incident-matrix",
    ),
    path("audit/", audit_views.AuditList.as_view(), name="api-audit"),
    path("schema/", views.SchemaView.as_view(), name="api-schema"),
]
