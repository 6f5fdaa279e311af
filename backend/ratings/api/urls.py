"""Ratings API routes: /api/campaigns/ and /api/studies/ (researchers), /api/rate/ (evaluator token only)."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from ratings.api import studies, views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("campaigns", views.CampaignViewSet, basename="campaign")
router.register("studies", studies.StudyViewSet, basename="study")

urlpatterns = [
    path("", include(router.urls)),
    path("rate/state/", views.StateView.as_view(), name="rate-state"),
    path("rate/consent/", views.ConsentView.as_view(), name="rate-consent"),
    path("rate/screens/", views.ScreenView.as_view(), name="rate-screens"),
    path("rate/ratings/", views.SubmitView.as_view(), name="rate-ratings"),
    path("rate/slot/", views.SlotView.as_view(), name="rate-slot"),
    path("rate/session/", views.SessionView.as_view(), name="rate-session"),
]
