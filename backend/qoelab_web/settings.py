"""Django settings for qoelab, read from the environment (see .env.example at the repo root).

Every variable is prefixed ``QOELAB_`` except the two URLs every tool knows (``DATABASE_URL``,
``REDIS_URL``). Booleans accept only ``true``/``false`` (any case) or ``1``/``0``: a typo such as
``QOELAB_DEBUG=ture`` stops the process instead of silently meaning False.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

BACKEND_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = BACKEND_DIR.parent

env = environ.Env()


def env_bool(name: str, default: bool) -> bool:
    """Strict boolean: true/false/1/0 only, anything else is a configuration error."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise ImproperlyConfigured(f"{name} must be 'true' or 'false', got {raw!r}")


def env_str(name: str, default: str) -> str:
    """The variable, or ``default`` when unset or empty (an empty line in .env means "default")."""
    raw = os.environ.get(name, "").strip()
    return raw or default


def env_csv(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name, "").strip()
    return [x.strip() for x in raw.split(",") if x.strip()] if raw else default


def env_int(name: str, default: int, lo: int = 1) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if value < lo:
        raise ImproperlyConfigured(f"{name} must be at least {lo}, got {value}")
    return value


DEBUG = env_bool("QOELAB_DEBUG", False)
# The test suite runs with production settings (DEBUG off) but needs no secret.
TESTING = "pytest" in sys.modules

SECRET_KEY = env_str("QOELAB_SECRET_KEY", "")
if not SECRET_KEY:
    if not (DEBUG or TESTING):
        raise ImproperlyConfigured(
            "QOELAB_SECRET_KEY is required when QOELAB_DEBUG is false "
            "(generate one: python -c 'import secrets; print(secrets.token_urlsafe(50))')"
        )
    SECRET_KEY = "qoelab-insecure-development-key-do-not-use-in-production"
elif not (DEBUG or TESTING) and (len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5):
    # Django's own bar (check --deploy, security.W009): a short key signs sessions and CSRF tokens.
    raise ImproperlyConfigured(
        f"QOELAB_SECRET_KEY is too short ({len(SECRET_KEY)} characters; at least 50, with 5 different "
        "ones, when QOELAB_DEBUG is false): python -c 'import secrets; print(secrets.token_urlsafe(50))'"
    )

ALLOWED_HOSTS = env_csv("QOELAB_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "web"])
CSRF_TRUSTED_ORIGINS = env_csv("QOELAB_CSRF_TRUSTED_ORIGINS", [])

# The HTTPS profile (docs/security.md, "Deploying with HTTPS"): one switch a deployer sets when the site
# is reached over TLS only; each part can be overridden. `manage.py check --deploy` is clean with it.
QOELAB_HTTPS = env_bool("QOELAB_HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("QOELAB_SSL_REDIRECT", QOELAB_HTTPS)
# Not redirected: the compose healthcheck (curl on the container's plain port) and the worker protocol
# (workers inside the compose network call http://web:8000; a redirected POST would arrive as a GET,
# and the host token was already sent when a redirect could answer).
SECURE_REDIRECT_EXEMPT = [r"^api/status/$", r"^api/hosts/"]
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("QOELAB_SECURE_COOKIES", QOELAB_HTTPS)
SECURE_HSTS_SECONDS = env_int("QOELAB_HSTS_SECONDS", 365 * 24 * 3600 if QOELAB_HTTPS else 0, lo=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("QOELAB_HSTS_INCLUDE_SUBDOMAINS", QOELAB_HTTPS)
SECURE_HSTS_PRELOAD = env_bool("QOELAB_HSTS_PRELOAD", False)
# security.W021 only says "without preload the site cannot be submitted to the browsers' preload
# list". Preloading is a commitment of the whole registrable domain (example.org, not the lab's
# lab.example.org) that its owner makes at hstspreload.org; QOELAB_HSTS_PRELOAD=true opts in.
SILENCED_SYSTEM_CHECKS = ["security.W021"]


def proxy_ssl_header(raw: str) -> tuple[str, str] | None:
    """``X-Forwarded-Proto`` or ``X-Forwarded-Proto: https`` -> Django's SECURE_PROXY_SSL_HEADER."""
    if not raw:
        return None
    name, _, value = raw.partition(":")
    name, value = name.strip(), value.strip() or "https"
    if not name or not all(c.isalnum() or c == "-" for c in name):
        raise ImproperlyConfigured(f"QOELAB_PROXY_SSL_HEADER must be a header name, got {raw!r}")
    return "HTTP_" + name.upper().replace("-", "_"), value


# Only behind a TLS-terminating proxy that sets (and overwrites) this header: anyone reaching gunicorn
# directly could send it too, so the web port must then be reachable only through the proxy.
SECURE_PROXY_SSL_HEADER = proxy_ssl_header(env_str("QOELAB_PROXY_SSL_HEADER", ""))
# True when gunicorn is reachable only through the lab's nginx, which overwrites X-Forwarded-For
# with the client's address (qoelab_web.proxy). make demo and docker-compose set it.
QOELAB_BEHIND_PROXY = env_bool("QOELAB_BEHIND_PROXY", False)

# scheme://host[:port] evaluators' invite links are made from (never the request's Host header).
# Unset: links come from the request only when QOELAB_DEBUG is true; otherwise invites are refused
# with a message naming this setting (qoelab_web.baseurl).
QOELAB_BASE_URL = env_str("QOELAB_BASE_URL", "").rstrip("/")
_base = urlsplit(QOELAB_BASE_URL)
# No path: reverse() already adds the script prefix of a site mounted below "/".
if QOELAB_BASE_URL and (_base.scheme not in ("http", "https") or not _base.hostname or any(_base[2:])):
    raise ImproperlyConfigured(
        "QOELAB_BASE_URL must be scheme://host[:port] (e.g. https://lab.example.org), "
        f"got {QOELAB_BASE_URL!r}"
    )

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "accounts",
    "hosts",
    "experiments",
    "results",
    "dashboard",
    "ratings",
]

MIDDLEWARE = [
    # First: every later layer (the login and reset limits) sees the client's address, not nginx's
    "qoelab_web.proxy.ProxyClientAddressMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "qoelab_web.security.ContentSecurityPolicyMiddleware",  # CSP on every response (docs/security.md)
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A login form re-rendered after a throttled attempt answers 429 + Retry-After (docs/security.md)
    "qoelab_web.throttles.LoginThrottleMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # 400 for a NUL in an /api/ query string; every /api/ 404 as JSON (docs/security.md)
    "qoelab_web.middleware.ApiInputMiddleware",
]

ROOT_URLCONF = "qoelab_web.urls"
WSGI_APPLICATION = "qoelab_web.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url_config(env_str("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/qoelab"))
}
DATABASES["default"].setdefault("CONN_MAX_AGE", 60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")

# Every throttle (failed logins, evaluator submissions) counts here, shared by all web processes:
# per-process memory would let each gunicorn worker allow the whole rate. Keys carry a prefix, so
# the cache may share the broker's Redis database; tests get a prefix of their own per process.
CACHE_KEY_PREFIX = f"qoelab-test-{os.getpid()}" if TESTING else env_str("QOELAB_CACHE_KEY_PREFIX", "qoelab")
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": env_str("QOELAB_CACHE_URL", REDIS_URL),
        "KEY_PREFIX": CACHE_KEY_PREFIX,
    }
}

# Failed passwords allowed per username and per client address ("<count>/<n><s|min|hour>"), on the
# login form, the admin's and POST /api/auth/token/; past them: 429 with Retry-After.
QOELAB_LOGIN_FAILURES_PER_USER = env_str("QOELAB_LOGIN_FAILURES_PER_USER", "10/15min")
# Password-reset requests per client address (each may send a mail).
QOELAB_PASSWORD_RESETS_PER_ADDRESS = env_str("QOELAB_PASSWORD_RESETS_PER_ADDRESS", "5/hour")
QOELAB_LOGIN_FAILURES_PER_ADDRESS = env_str("QOELAB_LOGIN_FAILURES_PER_ADDRESS", "30/15min")
AUTHENTICATION_BACKENDS = ["qoelab_web.throttles.ThrottledModelBackend"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(env_str("QOELAB_STATIC_ROOT", str(REPO_DIR / ".state" / "static")))
# Until collectstatic has run, files come from the finders (dev server, tests).
WHITENOISE_USE_FINDERS = True
STATICFILES_DIRS = [p for p in (REPO_DIR / "frontend" / "dist",) if p.is_dir()]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        # Manifest storage needs collectstatic; the dev server and tests serve the plain files.
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage",
    },
}

MEDIA_ROOT = Path(env_str("QOELAB_MEDIA_ROOT", str(REPO_DIR / ".state" / "media")))
MEDIA_URL = "/media/"

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        # Researchers' API tokens, stored hashed (accounts.ApiToken), not DRF's plain authtoken.
        "accounts.authentication.HashedTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Documents the shared 400/401/403/404/429 answers and pages only where DRF paginates.
    "DEFAULT_SCHEMA_CLASS": "qoelab_web.schema.AutoSchema",
    # Bodies that PostgreSQL cannot store (NUL, lone surrogates) or nest too deep answer 400.
    "DEFAULT_PARSER_CLASSES": [
        "qoelab_web.parsers.SafeJSONParser",
        "qoelab_web.parsers.SafeFormParser",
        "qoelab_web.parsers.SafeMultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "qoelab_web.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "qoelab_web.api.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "qoelab API",
    "DESCRIPTION": "Remote-desktop QoE lab: experiments, sweeps, trials, results and the worker protocol.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "TrialStatusEnum": "experiments.choices.TrialStatus",
    },
}

# The scheduler's Celery app only sends; the worker owns acks_late, prefetch and time limits.
CELERY_BROKER_URL = REDIS_URL

QOELAB_MAX_TRIALS_PER_SWEEP = env_int("QOELAB_MAX_TRIALS_PER_SWEEP", 10000)
QOELAB_HEARTBEAT_TIMEOUT = env_int("QOELAB_HEARTBEAT_TIMEOUT", 60)
# Sweep pages poll /api/sweeps/<id>/progress/; its answer is shared (Redis) for this many seconds, so
# many open pages cost one computation per interval. 0: compute on every request.
QOELAB_PROGRESS_CACHE_S = env_int("QOELAB_PROGRESS_CACHE_S", 1, lo=0)
# A trial queued this long without a claim lost its Celery message (Redis restarted, queue purged).
QOELAB_QUEUED_TIMEOUT = env_int("QOELAB_QUEUED_TIMEOUT", 300)
QOELAB_MAX_ARTIFACT_BYTES = env_int("QOELAB_MAX_ARTIFACT_BYTES", 2 * 1024**3)
# Where the live evaluator page's remote-desktop client may open its WebSocket (CSP connect-src, besides
# this origin): the lab workers' proxies. Any ws:/wss: by default; e.g. "wss://lab1.example:6080".
QOELAB_CSP_CONNECT_SRC = env_str("QOELAB_CSP_CONNECT_SRC", "ws: wss:")
# Days to keep trial artifacts (captures, logs, videos) before the scheduler deletes them; 0 keeps
# them forever. Measurements (samples, summaries) and videos a rating campaign uses are never pruned.
QOELAB_ARTIFACT_RETENTION_DAYS = env_int("QOELAB_ARTIFACT_RETENTION_DAYS", 0, lo=0)
# Artifact uploads stream to disk above this size instead of being held in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024**2
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("QOELAB_MAX_REQUEST_BYTES", 64 * 1024**2)
QOELAB_CODE_REVISION = env_str("QOELAB_CODE_REVISION", "")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # Evaluator link tokens (/rate/<token>/ on a 4xx), token= values and Authorization headers never
    # reach a log line (qoelab_web/logredact.py); gunicorn's own handlers get it in wsgi.py.
    "filters": {"redact": {"()": "qoelab_web.logredact.RedactTokens"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": env_str("QOELAB_LOG_LEVEL", "INFO").upper()},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # Django's defaults give these their own unfiltered handlers: route them through ours.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}
