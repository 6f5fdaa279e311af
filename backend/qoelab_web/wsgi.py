"""WSGI entry point (gunicorn qoelab_web.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qoelab_web.settings")
application = get_wsgi_application()
