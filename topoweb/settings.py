"""topoweb settings: one module, every deployment choice read from a TOPOWEB_* variable.

See README.md "Settings" for the full list. A bad value stops start-up with a message naming the
variable (``topoweb.env``).
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from topoweb.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"  # git-ignored: the default SQLite file, uploads of the dev server

# Debug only when asked for (``make run`` sets TOPOWEB_DEBUG=1): a server started with no
# environment must never show tracebacks or URL patterns, nor sign links with a public key.
DEBUG = env_bool("TOPOWEB_DEBUG", default=False)
# Under pytest the development key is allowed with debug off: tests run as production does.
TESTING = "pytest" in sys.modules

DEV_SECRET_KEY = "topoweb-insecure-development-key-change-me"
SECRET_KEY = env_str("TOPOWEB_SECRET_KEY") or ""
if not DEBUG and not TESTING and (not SECRET_KEY or SECRET_KEY == DEV_SECRET_KEY or len(SECRET_KEY) < 50
                                  or len(set(SECRET_KEY)) < 5):
    raise ImproperlyConfigured(
        "TOPOWEB_SECRET_KEY must be set to a long random value (50+ characters, not the development key) "
        "when TOPOWEB_DEBUG is off; e.g. TOPOWEB_SECRET_KEY=$(python3 -c 'import secrets; "
        "print(secrets.token_urlsafe(50))'). For a local trial run `make run` (it sets TOPOWEB_DEBUG=1).")
if not SECRET_KEY:
    SECRET_KEY = DEV_SECRET_KEY
    if DEBUG and not TESTING:
        warnings.warn("TOPOWEB_SECRET_KEY is not set: using the development key (never in production)")

ALLOWED_HOSTS = env_list("TOPOWEB_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ninja",  # its own Swagger UI files, so /api/v1/docs loads nothing from the internet
    "apps.topology",
    "apps.ingest",
    "apps.explorer",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# HTTPS behind a proxy (docs: README "Running in production"). Each is off unless set.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("TOPOWEB_SECURE_COOKIES", default=False)
SECURE_HSTS_SECONDS = env_int("TOPOWEB_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = env_bool("TOPOWEB_HSTS_PRELOAD", default=False)
SECURE_SSL_REDIRECT = env_bool("TOPOWEB_SSL_REDIRECT", default=False)
_proxy_header = env_str("TOPOWEB_PROXY_SSL_HEADER")  # e.g. X-Forwarded-Proto: the proxy sets it to "https"
if _proxy_header:
    if not re.fullmatch(r"[A-Za-z0-9-]+", _proxy_header.strip()):
        raise ImproperlyConfigured(f"TOPOWEB_PROXY_SSL_HEADER={_proxy_header!r}: expected a header name, "
                                   "e.g. X-Forwarded-Proto")
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_header.strip().upper().replace("-", "_"), "https")
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

ROOT_URLCONF = "topoweb.urls"
WSGI_APPLICATION = "topoweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

# Database: TOPOWEB_DATABASE_URL, e.g. postgres://user@127.0.0.1:5432/topoweb; default a SQLite file.
_default_db = f"sqlite:///{VAR_DIR / 'topoweb.sqlite3'}"
_db_url = env_str("TOPOWEB_DATABASE_URL") or _default_db
_conn_max_age = env_int("TOPOWEB_DB_CONN_MAX_AGE", 0, minimum=0)
try:
    # Connections close after each request by default: a threaded server must never hold one idle
    # connection per thread (that exhausts PostgreSQL's max_connections under many agents). Set
    # TOPOWEB_DB_CONN_MAX_AGE (seconds) for a server with a fixed worker count, e.g. gunicorn.
    DATABASES = {"default": dj_database_url.parse(_db_url, conn_max_age=_conn_max_age, conn_health_checks=True)}
except Exception as exc:  # dj_database_url raises several types for bad URLs
    raise ImproperlyConfigured(f"TOPOWEB_DATABASE_URL={_db_url!r}: {exc}") from None
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(exist_ok=True)
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # Tests use a file (not :memory:) so a Celery worker subprocess can open the same database;
    # one file per test process, so concurrent runs never share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "static_collected"

# Celery: with TOPOWEB_BROKER_URL unset, tasks run in-process (eager) so `make run` needs no broker.
CELERY_BROKER_URL = env_str("TOPOWEB_BROKER_URL") or "memory://"
CELERY_TASK_ALWAYS_EAGER = not env_str("TOPOWEB_BROKER_URL")
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True  # a worker killed mid-task leaves the message for another worker
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A broker host that is down without refusing connections must not stall a report submission:
# bounded connect/read timeouts make enqueueing fail fast (the upload stays "received" for the sweeper).
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 600, "socket_connect_timeout": 2, "socket_timeout": 5}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]

# Ingestion
from topoweb.env import cache_from_url, check_time_limits  # noqa: E402 (next to the settings they build)

MAX_REPORT_BYTES = env_int("TOPOWEB_MAX_REPORT_BYTES", 5 * 1024 * 1024, minimum=1024)
# A fabric discovery grows with the fabric: ibnetdiscover of 2,000 switches and 16,000 HCAs is ~9 MB.
MAX_FABRIC_BYTES = env_int("TOPOWEB_MAX_FABRIC_BYTES", 64 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(MAX_REPORT_BYTES, MAX_FABRIC_BYTES) + 1024 * 1024
SWEEP_AFTER_SECONDS = env_int("TOPOWEB_SWEEP_AFTER_SECONDS", 120, minimum=1)
# Raw text of uploads that created no snapshot (unchanged re-reports) is emptied after this many
# days by prune_uploads (and the beat task); 0 keeps every raw upload forever.
RAW_RETENTION_DAYS = env_int("TOPOWEB_RAW_RETENTION_DAYS", 0, minimum=0)
# A report dated further ahead of the server's clock is dated by its arrival (it would pin "latest").
CLOCK_SKEW_SECONDS = env_int("TOPOWEB_CLOCK_SKEW_SECONDS", 300, minimum=0)
# Most members (archive entries, files of a folder) one bulk import reads; the rest is left unread.
IMPORT_MAX_MEMBERS = env_int("TOPOWEB_IMPORT_MAX_MEMBERS", 100_000, minimum=1)
# Processing an upload (docs/ingestion.md "Pipeline"): a task is asked to stop after the soft
# limit and killed at the hard limit; the worker that claimed the upload holds it for the lease,
# longer than the hard limit, so nobody claims it again while that task may still run. After
# MAX_ATTEMPTS claims that never finished (the worker died or was killed) the upload is failed.
MAX_ATTEMPTS = env_int("TOPOWEB_MAX_ATTEMPTS", 3, minimum=1)
TASK_SOFT_TIME_LIMIT = env_int("TOPOWEB_TASK_SOFT_TIME_LIMIT", 120, minimum=1)
TASK_TIME_LIMIT = env_int("TOPOWEB_TASK_TIME_LIMIT", 180, minimum=1)
PROCESSING_LEASE_SECONDS = env_int("TOPOWEB_PROCESSING_LEASE_SECONDS", TASK_TIME_LIMIT + 60, minimum=1)
check_time_limits(TASK_SOFT_TIME_LIMIT, TASK_TIME_LIMIT, PROCESSING_LEASE_SECONDS)
# A bulk import reads many reports in one task: its own, longer limits. A job still "running"
# past its hard limit (+ 60 s) has lost its worker; the sweeper ends it "failed".
IMPORT_SOFT_TIME_LIMIT = env_int("TOPOWEB_IMPORT_SOFT_TIME_LIMIT", 3600, minimum=1)
IMPORT_TIME_LIMIT = env_int("TOPOWEB_IMPORT_TIME_LIMIT", IMPORT_SOFT_TIME_LIMIT + 60, minimum=1)
if not IMPORT_SOFT_TIME_LIMIT < IMPORT_TIME_LIMIT:
    raise ImproperlyConfigured(f"TOPOWEB_IMPORT_SOFT_TIME_LIMIT={IMPORT_SOFT_TIME_LIMIT} must be below "
                               f"TOPOWEB_IMPORT_TIME_LIMIT={IMPORT_TIME_LIMIT}")
# Redis redelivers an unacknowledged task after its visibility timeout: never while it may still run.
CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] = max(600, PROCESSING_LEASE_SECONDS, IMPORT_TIME_LIMIT + 60)

# POST /api/v1/reports per agent token (a cluster's whole fleet shares one): 0 turns it off.
RATE_LIMIT_PER_MINUTE = env_int("TOPOWEB_RATE_LIMIT_PER_MINUTE", 600, minimum=0)
# The rate limit counts in this cache: a shared one (Redis) for several server processes; the
# default, local memory, counts per process.
CACHES = {"default": cache_from_url("TOPOWEB_CACHE_URL", env_str("TOPOWEB_CACHE_URL"))}

# Access: the demo cluster (manage.py load_demo) is readable by every signed-in user unless this is off.
DEMO_OPEN_TO_ALL = env_bool("TOPOWEB_DEMO_OPEN_TO_ALL", default=True)

# Shared read-only path links
SHARE_LINK_MAX_AGE_DAYS = env_int("TOPOWEB_SHARE_LINK_MAX_AGE_DAYS", 14, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("TOPOWEB_LOG_LEVEL", "INFO")},
    "loggers": {
        # One line per task at INFO is noise for in-process runs (make run, load_demo); workers keep it.
        "celery.app.trace": {"level": "WARNING" if CELERY_TASK_ALWAYS_EAGER else "INFO"},
        "kombu.connection": {"level": "ERROR"},  # the in-memory transport's "no hostname" notice
    },
}
