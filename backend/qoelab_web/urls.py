"""URL map: the REST API under /api/, login at /accounts/, the dashboard at /."""

from django.contrib import admin
from django.urls import include, path

from qoelab_web.auth import LoginView, PasswordResetView

# A database that does not answer is a 503 with Retry-After; every other error Django's 500.
handler500 = "qoelab_web.unavailable.handler500"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),  # throttled; the rest is Django's
    # Throttled, and the mail's link from QOELAB_BASE_URL, not the Host header.
    path("accounts/password_reset/", PasswordResetView.as_view(), name="password_reset"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("qoelab_web.api_urls")),
    path("rate/", include("ratings.rate_urls")),
    path("campaigns/", include("ratings.urls")),
    path("", include("dashboard.urls")),
]
