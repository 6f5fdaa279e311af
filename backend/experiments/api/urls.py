"""Researcher routes: /api/experiments/, /api/sweeps/, /api/job-types/, /api/link-traces/ (results and
trials: results.api)."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from experiments.api import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("experiments", views.ExperimentViewSet, basename="experiment")
router.register("sweeps", views.SweepViewSet, basename="sweep")
router.register("job-types", views.JobTypeViewSet, basename="job-type")
router.register("link-traces", views.LinkTraceViewSet, basename="link-trace")

urlpatterns = [path("", include(router.urls))]
