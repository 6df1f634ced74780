from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from incidents.api import views

urlpatterns = [
    path("alerts/", views.AlertList.as_view(), name="api-alerts"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
]
