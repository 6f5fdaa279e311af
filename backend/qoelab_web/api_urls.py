"""All REST endpoints under /api/, gathered from the apps, plus status, tokens and the schema."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from experiments.api import worker as trial_calls
from qoelab_web.auth import ObtainTokenView
from qoelab_web.status import StatusView
from ratings.api import worker as live_calls
from results.api import worker as result_calls

# The worker protocol (docs/architecture.md), each call from the app that owns what it changes. These
# come before the host list's router, so /hosts/heartbeat/ is not read as a host's name.
worker_protocol = [
    path("hosts/heartbeat/", trial_calls.HeartbeatView.as_view(), name="host-heartbeat"),
    path("hosts/trials/<int:trial_id>/claim/", trial_calls.ClaimView.as_view(), name="host-trial-claim"),
    path(
        "hosts/trials/<int:trial_id>/artifacts/",
        result_calls.ArtifactUploadView.as_view(),
        name="host-trial-artifacts",
    ),
    path(
        "hosts/trials/<int:trial_id>/captures/<int:source_id>/",
        result_calls.CaptureInputView.as_view(),
        name="host-trial-capture",
    ),
    path(
        "hosts/trials/<int:trial_id>/link-traces/<int:trace_id>/",
        trial_calls.LinkTraceInputView.as_view(),
        name="host-trial-link-trace",
    ),
    path("hosts/trials/<int:trial_id>/live/", live_calls.LiveReportView.as_view(), name="host-trial-live"),
    path("hosts/trials/<int:trial_id>/finish/", result_calls.FinishView.as_view(), name="host-trial-finish"),
]

urlpatterns = [
    path("status/", StatusView.as_view(), name="status"),
    path("auth/token/", ObtainTokenView.as_view(), name="api-token"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view loads its init script from a URL (no inline script: the CSP allows none).
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    *worker_protocol,
    path("", include("hosts.api.urls")),
    path("", include("experiments.api.urls")),
    path("", include("results.api.urls")),
    path("", include("ratings.api.urls")),
]
