"""WSGI entry point (gunicorn qoelab_web.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qoelab_web.settings")
application = get_wsgi_application()

# gunicorn configures its loggers itself: its error log names a failing request's URL.
from qoelab_web.logredact import install_on_loggers  # noqa: E402

install_on_loggers("gunicorn.error", "gunicorn.access")

# What start-up made lives as long as the process: load the URL conf (and with it every view)
# now, then move it all out of the collector's reach. Without this, full collections walked the
# whole Django import graph and stalled about one request in a hundred (issue 33; measured in
# docs/reliability.md, "The sweep list as the lab grows").
import gc  # noqa: E402

from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # noqa: B018 (evaluated for its imports)
gc.freeze()
