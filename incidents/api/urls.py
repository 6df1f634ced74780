from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from incidents.api import views

urlpatterns = [
    path("alerts/", views.AlertList.as_view(), name="api-alerts"),
    path("incidents/", views.IncidentList.as_view(), name="api-incidents"),
    path("incidents/<int:incident_id>/", views.IncidentDetail.as_view(), name="api-incident"),
    path("incidents/<int:incident_id>/actions/", views.IncidentActions.as_view(), name="api-incident-actions"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
]
