"""App config."""

from django.apps import AppConfig


class HostsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "hosts"
