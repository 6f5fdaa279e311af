"""Worker protocol routes (before the router, so /hosts/heartbeat/ is not read as a host name)."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from hosts.api import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("hosts", views.WorkerHostViewSet, basename="host")

urlpatterns = [
    path("hosts/heartbeat/", views.HeartbeatView.as_view(), name="host-heartbeat"),
    path("hosts/trials/<int:trial_id>/claim/", views.ClaimView.as_view(), name="host-trial-claim"),
    path(
        "hosts/trials/<int:trial_id>/artifacts/",
        views.ArtifactUploadView.as_view(),
        name="host-trial-artifacts",
    ),
    path(
        "hosts/trials/<int:trial_id>/captures/<int:source_id>/",
        views.CaptureInputView.as_view(),
        name="host-trial-capture",
    ),
    path("hosts/trials/<int:trial_id>/live/", views.LiveReportView.as_view(), name="host-trial-live"),
    path("hosts/trials/<int:trial_id>/finish/", views.FinishView.as_view(), name="host-trial-finish"),
    path("", include(router.urls)),
]
