"""Rating campaigns: evaluators rate remote-desktop conditions on the P.910 DCR impairment scale."""

from django.apps import AppConfig


class RatingsConfig(AppConfig):
    name = "ratings"
    verbose_name = "Rating campaigns"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # `check --deploy` warns when invite links have no QOELAB_BASE_URL to start with.
        import qoelab_web.baseurl  # noqa: F401
