"""Django settings, derived entirely from regsite.config (TOML file + SVC_* environment)."""
from __future__ import annotations

import os
import secrets
from pathlib import Path

from regsite import config, files, logs

BASE_DIR = Path(__file__).resolve().parent.parent
# Every file and directory the registry creates (the database and its journal, blob and upload data,
# token files, the session key) is the service user's alone: 0600 and 0700.
os.umask(0o077)
SVC = config.served() or config.load_or_exit()


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
    "django.contrib.sessions",
    "django.contrib.staticfiles",
    "django_prometheus",
    "registry",
    "tokens",
    "ops",
    "notifications",
    "audit",
    "replication",
]

MIDDLEWARE = [
    # The prometheus pair brackets everything, the request log sits outside authentication so
    # that refusals are logged and counted too. A trusted proxy's X-Forwarded-Proto is applied
    # first, so that everything after it (HSTS, CSRF, cookies) sees the client's scheme.
    "regsite.forwarded.ForwardedProtoMiddleware",
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "ops.middleware.RequestLogMiddleware",
    "regsite.db.ReleaseBeforeStreamingMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before anything reads the request: a NUL in its path, query or headers is a 400 (regsite.text).
    "regsite.text.TextMiddleware",
    # Before authentication: a mirror's ?ns= or /<prefix>/v2/ path is rewritten to the name it means.
    "registry.proxy.routing.ProxyRoutingMiddleware",
    # Outside authentication, so that it sees refusals too: the audit log's request-level events.
    "audit.middleware.AuditMiddleware",
    "tokens.middleware.AuthenticationMiddleware",
    # After authentication: only a client who may write learns that a namespace is a cache of what.
    "registry.proxy.routing.ReadOnlyNamespaceMiddleware",
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
    "staticfiles": {"BACKEND": "regsite.staticfiles.StaticFilesStorage"},
}

# Registry bodies are streamed by the views; Django must never buffer them into memory.
DATA_UPLOAD_MAX_MEMORY_SIZE = None
FILE_UPLOAD_MAX_MEMORY_SIZE = 0

# Sessions (the UI's sign-ins) are rows in the database: signing out deletes the row, so a copied
# cookie stops working at once, on every replica. Cookies are Secure on HTTPS requests (ops.ui.access).
SESSION_ENGINE = "django.contrib.sessions.backends.db"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
# Only the web UI uses CSRF (per view, with csrf_protect); its failure page explains what to do.
CSRF_FAILURE_VIEW = "ops.ui.views.csrf_failure"
SECURE_CONTENT_TYPE_NOSNIFF = True
# Sent only on requests that came over HTTPS (through a trusted proxy: regsite.forwarded).
SECURE_HSTS_SECONDS = 365 * 24 * 3600
# Addresses whose X-Forwarded-For and X-Forwarded-Proto are believed ([server] trusted_proxies).
SERVER_TRUSTED_PROXIES = config.proxy_networks(SVC["server"]["trusted_proxies"])
# How clients reach the registry ([server] external_url; "" when not set): the Bearer realm and the
# URLs of webhook events are built from it, never from a Host header (regsite.forwarded.public_base).
SERVER_EXTERNAL_URL: str = SVC["server"]["external_url"]
# /ready runs its checks at most once per this many seconds in each process (ops.readiness).
READY_CACHE_SECONDS: int = SVC["server"]["ready_cache_seconds"]

REGISTRY_STORAGE = SVC["storage"]
REGISTRY_STORAGE_ROOT = Path(SVC["storage"]["root"])
# Blob GETs on S3 answer 307 to a presigned URL (the store serves the bytes, Range included).
REGISTRY_REDIRECT: bool = SVC["storage"]["redirect"]
REGISTRY_DELETE_ENABLED: bool = SVC["registry"]["delete_enabled"]
REGISTRY_MAX_MANIFEST_BYTES: int = SVC["registry"]["max_manifest_bytes"]
REGISTRY_MAX_DESCRIPTORS: int = SVC["registry"]["max_descriptors"]
REGISTRY_UPLOAD_EXPIRY_HOURS: int = SVC["registry"]["upload_expiry_hours"]
REGISTRY_MAX_UPLOAD_SESSIONS: int = SVC["registry"]["max_upload_sessions"]
# A referrers listing's page: descriptors, bytes of annotations, and the most one descriptor carries.
REGISTRY_REFERRERS_PER_PAGE: int = SVC["registry"]["referrers_per_page"]
REGISTRY_REFERRERS_PAGE_ANNOTATION_BYTES: int = SVC["registry"]["referrers_page_annotation_bytes"]
REGISTRY_REFERRER_ANNOTATION_BYTES: int = SVC["registry"]["referrer_annotation_bytes"]
# The UI's manifest page: entries (layers or index children) per page, and how much of its JSON it shows.
UI_MANIFEST_ENTRIES_PER_PAGE: int = SVC["ui"]["manifest_entries_per_page"]
UI_MANIFEST_JSON_BYTES: int = SVC["ui"]["manifest_json_bytes"]
REGISTRY_GC_INTERVAL_HOURS: int = SVC["gc"]["interval_hours"]
REGISTRY_GC_GRACE_HOURS: int = SVC["gc"]["grace_hours"]
REGISTRY_MIN_FREE_BYTES: int = SVC["storage"]["min_free_bytes"]
# Governance rules ([[retention]], [[immutable]], [[quota]]), read by registry.policies.rules.
REGISTRY_RETENTION: list[dict] = SVC["retention"]
REGISTRY_IMMUTABLE: list[dict] = SVC["immutable"]
REGISTRY_QUOTAS: list[dict] = SVC["quota"]
# Pull-through caches, one entry per [[proxy]] table (registry.proxy).
REGISTRY_PROXIES: list[dict] = SVC["proxy"]
# Request threads of a worker that may wait on upstreams at once, all caches together (registry.proxy.slots).
REGISTRY_PROXY_WORKER_FETCHES: int = max(1, SVC["server"]["threads"] // 2)

# [[notifications]]: webhook endpoints (notifications.endpoints); the address events name as their source.
NOTIFICATIONS: list[dict] = SVC["notifications"]
NOTIFICATIONS_SOURCE: str = SVC["server"]["bind"]
# [[replication]]: push to and pull from other registries (replication.policies).
REPLICATION: list[dict] = SVC["replication"]

AUTH_ENABLED: bool = SVC["auth"]["enabled"]
AUTH_HTPASSWD_FILE = Path(SVC["auth"]["htpasswd_file"])
AUTH_TOKEN_STORAGE = Path(SVC["auth"]["token_storage"])
AUTH_TOKEN_BACKEND: str = SVC["auth"]["token_backend"]
# Docker's token flow (tokens/bearer.py): which challenge a 401 carries, and the signed tokens' lives.
AUTH_CHALLENGE: str = SVC["auth"]["challenge"]
AUTH_TOKEN_REALM: str = SVC["auth"]["token_realm"]
AUTH_BEARER_TTL_SECONDS: int = SVC["auth"]["bearer_ttl_seconds"]
AUTH_REFRESH_TTL_DAYS: int = SVC["auth"]["refresh_ttl_days"]
AUTH_MAX_TOKENS_PER_USER: int = SVC["auth"]["max_tokens_per_user"]
AUTH_LOGIN_FAILURES: int = SVC["auth"]["login_failures"]
AUTH_LOGIN_BACKOFF_MAX: int = SVC["auth"]["login_backoff_max"]
# Access control (tokens.authz): the [[access]] rules, the role where none matches, the groups file
# (re-read when it changes) and who is an admin everywhere.
ACCESS_RULES: list[dict] = SVC["access"]
AUTH_DEFAULT_ROLE: str = SVC["auth"]["default_role"]
AUTH_GROUPS_FILE: str = SVC["auth"]["groups_file"]
AUTH_ADMINS: list[str] = SVC["auth"]["admins"]
# Identity sources beside htpasswd: an LDAP directory for passwords (tokens.directory), an OpenID
# Connect provider for the web UI (ops.ui.oidc). Each is off while its address is empty.
LDAP: dict = SVC["ldap"]
OIDC: dict = SVC["oidc"]
# The audit log (audit): its rows are kept this many days.
AUDIT_RETENTION_DAYS: int = SVC["audit"]["retention_days"]

# Every line is one JSON object (regsite.logs), the request log's (ops.requests) included.
LOG_LEVEL = SVC["server"]["log_level"].upper()
LOGGING = logs.config(LOG_LEVEL, {
    # Django's own line for each 4xx and 5xx ("Internal Server Error: /v2/..."), logged after the
    # request's: every response has its request line (ops.requests, at error level for a 5xx), and an
    # exception its one line with the traceback (registry.errors), so this would log each 5xx twice.
    "django.request": {"level": "CRITICAL"},
    "ops.requests": {"handlers": ["stderr"], "level": LOG_LEVEL, "propagate": False},
    # The audit log's lines are written whatever [server] log_level says (audit.log).
    "audit": {"level": "INFO"},
})
