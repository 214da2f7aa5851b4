"""Django settings, derived entirely from regsite.config (TOML file + SVC_* environment)."""
from __future__ import annotations

import os
import secrets
from pathlib import Path

from regsite import config, files

BASE_DIR = Path(__file__).resolve().parent.parent
# Every file and directory the registry creates (the database and its journal, blob and upload data,
# token files, the session key) is the service user's alone: 0600 and 0700.
os.umask(0o077)
SVC = config.load_or_exit()


def _secret_key(path: Path) -> str:
    # Every gunicorn worker must sign sessions with the same key, so it lives in a file made once;
    # workers starting together race to create it, and the losers read the winner's key.
    if not path.exists():
        files.create_file(path, secrets.token_urlsafe(50).encode("ascii"), mode=0o600)
    return path.read_text().strip()


SECRET_KEY = os.environ.get("SVC_SECRET_KEY") or _secret_key(Path(SVC["server"]["secret_key_file"]))
DEBUG = False
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.staticfiles",
    "django_prometheus",
    "registry",
    "tokens",
    "ops",
    "notifications",
]

MIDDLEWARE = [
    # The prometheus pair brackets everything, the request log sits outside authentication so
    # that refusals are logged and counted too.
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "ops.middleware.RequestLogMiddleware",
    "regsite.db.ReleaseBeforeStreamingMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "tokens.middleware.AuthenticationMiddleware",
    # After authentication: the events a request causes name its principal.
    "notifications.middleware.EventContextMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "regsite.urls"
WSGI_APPLICATION = "regsite.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
            ],
            "libraries": {"ui": "ops.ui.format"},
        },
    },
]

DATABASES = {"default": config.database_settings(SVC["database"])}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# Registry bodies are streamed by the views; Django must never buffer them into memory.
DATA_UPLOAD_MAX_MEMORY_SIZE = None
FILE_UPLOAD_MAX_MEMORY_SIZE = 0

SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
# Only the web UI uses CSRF (per view, with csrf_protect); its failure page explains what to do.
CSRF_FAILURE_VIEW = "ops.ui.views.csrf_failure"
SECURE_CONTENT_TYPE_NOSNIFF = True

REGISTRY_STORAGE = SVC["storage"]
REGISTRY_STORAGE_ROOT = Path(SVC["storage"]["root"])
# Blob GETs on S3 answer 307 to a presigned URL (the store serves the bytes, Range included).
REGISTRY_REDIRECT: bool = SVC["storage"]["redirect"]
REGISTRY_DELETE_ENABLED: bool = SVC["registry"]["delete_enabled"]
REGISTRY_MAX_MANIFEST_BYTES: int = SVC["registry"]["max_manifest_bytes"]
REGISTRY_MAX_DESCRIPTORS: int = SVC["registry"]["max_descriptors"]
REGISTRY_UPLOAD_EXPIRY_HOURS: int = SVC["registry"]["upload_expiry_hours"]
REGISTRY_GC_INTERVAL_HOURS: int = SVC["gc"]["interval_hours"]
REGISTRY_GC_GRACE_HOURS: int = SVC["gc"]["grace_hours"]
REGISTRY_MIN_FREE_BYTES: int = SVC["storage"]["min_free_bytes"]

# [[notifications]]: webhook endpoints (notifications.endpoints); the address events name as their source.
NOTIFICATIONS: list[dict] = SVC["notifications"]
NOTIFICATIONS_SOURCE: str = SVC["server"]["bind"]

AUTH_ENABLED: bool = SVC["auth"]["enabled"]
AUTH_HTPASSWD_FILE = Path(SVC["auth"]["htpasswd_file"])
AUTH_TOKEN_STORAGE = Path(SVC["auth"]["token_storage"])
AUTH_TOKEN_BACKEND: str = SVC["auth"]["token_backend"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json_line": {"format": "%(message)s"},  # ops.middleware writes each line as JSON
    },
    "handlers": {
        "stderr": {"class": "logging.StreamHandler", "formatter": "plain"},
        "requests": {"class": "logging.StreamHandler", "formatter": "json_line"},
    },
    "root": {"handlers": ["stderr"], "level": SVC["server"]["log_level"].upper()},
    "loggers": {
        "django.request": {"level": "ERROR"},
        "ops.requests": {"handlers": ["requests"], "level": SVC["server"]["log_level"].upper(),
                         "propagate": False},
    },
}
