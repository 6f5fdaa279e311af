"""Researcher pages for rating campaigns under /campaigns/."""

from django.urls import URLPattern, path

from ratings import lifecycle, study_views, views

app_name = "ratings"
urlpatterns: list[URLPattern] = [
    path("", views.campaign_list, name="campaigns"),
    path("new/", views.campaign_new, name="campaign_new"),
    path("<int:pk>/", views.campaign_detail, name="campaign"),
    path("<int:pk>/action/", views.campaign_action, name="campaign_action"),
    path("<int:pk>/archive/", lifecycle.campaign_archive, name="campaign_archive"),
    path("<int:pk>/delete/", lifecycle.campaign_delete, name="campaign_delete"),
    path("<int:pk>/invite/", views.campaign_invite, name="campaign_invite"),
    path("<int:pk>/evaluators/<int:evaluator>/", views.evaluator_action, name="evaluator_action"),
    path("<int:pk>/progress.json", views.campaign_progress, name="campaign_progress"),
    path("<int:pk>/results/", views.campaign_results, name="campaign_results"),
    path("<int:pk>/export/ratings.csv", views.export_ratings, name="export_ratings"),
    path("<int:pk>/export/dmos.csv", views.export_summary, name="export_summary"),
    # Rating sets collected elsewhere, imported read-only (ratings/studies.py).
    path("studies/", study_views.study_list, name="studies"),
    path("studies/new/", study_views.study_new, name="study_new"),
    path("studies/<int:pk>/", study_views.study_results, name="study"),
    path("studies/<int:pk>/delete/", study_views.study_delete, name="study_delete"),
    path("studies/<int:pk>/export/votes.csv", study_views.export_votes, name="study_votes"),
    path("studies/<int:pk>/export/scores.csv", study_views.export_scores, name="study_scores"),
]
