"""App config; deleting an Artifact row also deletes its file."""

from django.apps import AppConfig

from qoelab_web.chores import Chore


class ResultsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "results"
    scheduler_chores = (Chore("results.services.apply_retention", every_s=3600.0),)

    def ready(self) -> None:
        from django.db.models.signals import post_delete

        from results.models import Artifact

        def delete_file(sender: type, instance: Artifact, **kwargs: object) -> None:
            if instance.file:
                instance.file.delete(save=False)

        post_delete.connect(delete_file, sender=Artifact, dispatch_uid="results.artifact.delete_file")
