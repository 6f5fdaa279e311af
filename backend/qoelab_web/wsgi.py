"""WSGI entry point (gunicorn qoelab_web.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qoelab_web.settings")
application = get_wsgi_application()

# gunicorn configures its loggers itself: its error log names a failing request's URL.
from qoelab_web.logredact import install_on_loggers  # noqa: E402

install_on_loggers("gunicorn.error", "gunicorn.access")
