"""Result routes."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from results.api import aggregate, export, findings, tables, trials, views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("trials", trials.TrialViewSet, basename="trial")

urlpatterns = [
    path("sweeps/<int:pk>/aggregate/", aggregate.SweepAggregateView.as_view(), name="sweep-aggregate"),
    path(
        "artifacts/<int:artifact_id>/download/",
        views.ArtifactDownloadView.as_view(),
        name="artifact-download",
    ),
    path("sweeps/<int:pk>/findings/", findings.SweepFindingsView.as_view(), name="sweep-findings"),
    path("sweeps/<int:pk>/tables/", tables.SweepTablesView.as_view(), name="sweep-tables"),
    path("sweeps/<int:pk>/export/", export.SweepExportView.as_view(), name="sweep-export"),
    path("", include(router.urls)),
]
