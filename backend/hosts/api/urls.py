"""The researchers' host list (``/api/hosts/``); the worker protocol's routes are in qoelab_web.api_urls."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from hosts.api import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("hosts", views.WorkerHostViewSet, basename="host")

urlpatterns = [path("", include(router.urls))]
