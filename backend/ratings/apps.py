"""Rating campaigns: evaluators rate remote-desktop conditions on the P.910 DCR impairment scale."""

from django.apps import AppConfig


class RatingsConfig(AppConfig):
    name = "ratings"
    verbose_name = "Rating campaigns"
    default_auto_field = "django.db.models.BigAutoField"
