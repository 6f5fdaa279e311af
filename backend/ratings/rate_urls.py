"""Evaluator pages: /rate/<token>/ (the token in the link is the only credential)."""

from django.urls import URLPattern, path

from ratings import evaluator_views as views

app_name = "ratings_rate"
urlpatterns: list[URLPattern] = [
    path("", views.resume, name="resume"),
    path("<str:token>/", views.rate, name="rate"),
    path(
        "<str:token>/live-reference/<int:condition>/<str:name>", views.live_reference, name="live-reference"
    ),
    path("<str:token>/media/<int:condition>/<str:stage>/", views.media, name="media"),
]
