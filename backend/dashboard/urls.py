"""Dashboard URLs: researcher pages at the site root (login at /accounts/login/)."""

from django.urls import URLPattern, URLResolver, path

from dashboard import compare, lifecycle, traces, views

app_name = "dashboard"
urlpatterns: list[URLPattern | URLResolver] = [
    path("", lifecycle.experiment_list, name="experiments"),
    path("experiments/<int:pk>/", views.experiment_detail, name="experiment"),
    path("experiments/<int:pk>/archive/", lifecycle.experiment_archive, name="experiment_archive"),
    path("experiments/<int:pk>/delete/", lifecycle.experiment_delete, name="experiment_delete"),
    path("sweeps/new/", lifecycle.sweep_new, name="sweep_new"),
    path("reproduce/", views.reproduce_page, name="reproduce"),
    path("reproduce/<slug:key>/start/", views.reproduce_start, name="reproduce_start"),
    path("sweeps/<int:pk>/", views.sweep_detail, name="sweep"),
    path("sweeps/<int:pk>/trials/", views.sweep_trials, name="sweep_trials"),
    path("sweeps/<int:pk>/chart.json", views.sweep_chart, name="sweep_chart"),
    path("compare/", compare.compare_page, name="compare"),
    path("traces/", traces.link_traces_page, name="link_traces"),
    path("compare/chart.json", compare.compare_chart, name="compare_chart"),
    path("sweeps/<int:pk>/cancel/", views.sweep_cancel, name="sweep_cancel"),
    path("sweeps/<int:pk>/delete/", lifecycle.sweep_delete, name="sweep_delete"),
    path("sweeps/<int:pk>/rerun-failed/", lifecycle.sweep_rerun_failed, name="sweep_rerun_failed"),
    path("sweeps/<int:pk>/export/summaries.csv", views.export_summaries, name="export_summaries"),
    path("sweeps/<int:pk>/export/samples.csv", views.export_samples, name="export_samples"),
    path("trials/<int:pk>/", views.trial_detail, name="trial"),
    path("artifacts/<int:pk>/download/", views.artifact_download, name="artifact_download"),
    path("artifacts/<int:pk>/play/", views.artifact_play, name="artifact_play"),
]
