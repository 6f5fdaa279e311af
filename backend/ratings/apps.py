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
        from experiments.signals import deleting, deletion_planned
        from ratings import deletion
        from results.signals import artifacts_in_use

        # A sweep's deletion takes the campaigns that use it, or is refused because of them.
        deletion_planned.connect(deletion.plan_campaigns, dispatch_uid="ratings.plan_campaigns")
        deleting.connect(deletion.remove_planned_campaigns, dispatch_uid="ratings.remove_planned_campaigns")
        # Pruning old artifacts keeps the recordings campaigns show.
        artifacts_in_use.connect(deletion.recordings_in_use, dispatch_uid="ratings.recordings_in_use")
