"""Dashboard URLs (filled in by the dashboard engineer)."""

from django.urls import URLPattern, URLResolver

app_name = "dashboard"
urlpatterns: list[URLPattern | URLResolver] = []
