"""App config: deleting an Artifact row deletes its file; results takes part in experiments' decisions
(``experiments.signals``: a capture input, a sweep's deletion) and in the scheduler loop (retention)."""

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

        from experiments.signals import capture_input_named, deleting, deletion_planned
        from results import deletion
        from results.services import capture_input_problem

        capture_input_named.connect(capture_input_problem, dispatch_uid="results.capture_input_problem")
        deletion_planned.connect(deletion.count_artifacts, dispatch_uid="results.count_artifacts")
        deleting.connect(deletion.remove_artifact_files, dispatch_uid="results.remove_artifact_files")
