"""The qoelab Django project: settings, URLs, WSGI and the scheduler's Celery sender."""
