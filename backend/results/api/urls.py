"""Result routes."""

from django.urls import path

from results.api import views

urlpatterns = [
    path(
        "artifacts/<int:artifact_id>/download/",
        views.ArtifactDownloadView.as_view(),
        name="artifact-download",
    ),
]
