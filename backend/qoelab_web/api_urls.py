"""All REST endpoints under /api/, gathered from the apps, plus status, tokens and the schema."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from qoelab_web.auth import ObtainTokenView
from qoelab_web.status import StatusView

urlpatterns = [
    path("status/", StatusView.as_view(), name="status"),
    path("auth/token/", ObtainTokenView.as_view(), name="api-token"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view loads its init script from a URL (no inline script: the CSP allows none).
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("", include("hosts.api.urls")),
    path("", include("experiments.api.urls")),
    path("", include("results.api.urls")),
    path("", include("ratings.api.urls")),
]
