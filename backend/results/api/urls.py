"""Result routes."""

from django.urls import path

from results.api import export, findings, tables, views

urlpatterns = [
    path(
        "artifacts/<int:artifact_id>/download/",
        views.ArtifactDownloadView.as_view(),
        name="artifact-download",
    ),
    path("sweeps/<int:pk>/findings/", findings.SweepFindingsView.as_view(), name="sweep-findings"),
    path("sweeps/<int:pk>/tables/", tables.SweepTablesView.as_view(), name="sweep-tables"),
    path("sweeps/<int:pk>/export/", export.SweepExportView.as_view(), name="sweep-export"),
]
