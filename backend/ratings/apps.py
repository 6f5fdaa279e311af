"""Rating campaigns: evaluators rate remote-desktop conditions on the P.910 DCR impairment scale."""

from django.apps import AppConfig

from qoelab_web.chores import Chore


class RatingsConfig(AppConfig):
    name = "ratings"
    verbose_name = "Rating campaigns"
    default_auto_field = "django.db.models.BigAutoField"
    # Live rating sessions whose time ran out (also manage.py ratings_release_slots).
    scheduler_chores = (
        Chore("ratings.live.release_expired_slots", says="released %s expired live rating slot(s)"),
    )

    def ready(self) -> None:
        # `check --deploy` warns when invite links have no QOELAB_BASE_URL to start with.
        import qoelab_web.baseurl  # noqa: F401
