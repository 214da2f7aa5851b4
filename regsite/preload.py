"""What the gunicorn master imports before it forks its workers, so that they share it.

A worker that imports Django itself holds its own copy of Django's code, about 20 MiB; imported once
in the master, the pages are shared by every worker forked from it (copy-on-write), and
``gc.freeze()`` before each fork keeps the workers' garbage collector from writing to them.

Only code that reads no configuration is imported here: Django's framework modules, the libraries
and the standard library modules a worker uses, not ``regsite.settings``, the apps or their models,
nor anything of ours. A worker still loads the settings and the application itself, from the
configuration the master read (regsite.config.load_for_master), so SIGHUP (which reads it again and
starts new workers) applies a changed configuration file as before. What it does not
reload is this code: upgrading Django or a library needs a restart of the master, as with
gunicorn's ``preload_app``.

prometheus_client is left to the workers: in multiprocess mode a metric without labels opens its
file, named after the process, when it is defined.
"""
from __future__ import annotations

import gc
import importlib
import os
from typing import Any

FRAMEWORK = (
    # Django's request handling, ORM, templates and the contrib apps of INSTALLED_APPS (their
    # models are the workers': they need the settings).
    "django.core.wsgi",
    "django.core.handlers.wsgi",
    "django.conf.locale.en.formats",
    "django.db.backends.dummy.base",
    "django.db.backends.sqlite3.base",
    "django.db.models.sql.compiler",
    "django.db.migrations.executor",  # /ready's check that the schema is migrated
    "django.contrib.contenttypes.apps",
    "django.contrib.sessions.apps",
    "django.contrib.sessions.backends.db",
    "django.contrib.sessions.middleware",
    "django.contrib.sessions.serializers",
    "django.contrib.staticfiles.apps",
    "django.contrib.staticfiles.storage",
    "django.middleware.csrf",
    "django.middleware.security",
    "django.shortcuts",
    "django.template.context_processors",
    "django.template.loaders.app_directories",
    "django.template.loaders.cached",
    "django.templatetags.cache",
    "django.templatetags.l10n",
    "django.templatetags.static",
    "django.templatetags.tz",
    "django.utils.translation.trans_null",
    "django.views.decorators.csrf",
    # Libraries.
    "bcrypt",
    "sqlparse",
    "whitenoise.middleware",
    "whitenoise.storage",
    # The standard library's, for our code and prometheus_client's.
    "ctypes.util",
    "encodings.unicode_escape",
    "mmap",
    "wsgiref.simple_server",
)
# The database driver and the object store's client, on the set-ups that use them (10 to 11 MiB a
# worker each).
POSTGRESQL = ("psycopg", "psycopg_pool", "django.db.backends.postgresql.base")
S3 = ("boto3", "botocore.client")


def modules_for(svc: dict[str, Any]) -> tuple[str, ...]:
    """The modules to import for the service configuration ``svc`` (regsite.config)."""
    names = list(FRAMEWORK)
    if svc["database"]["url"].startswith(("postgres://", "postgresql://")):
        names += POSTGRESQL
    if svc["storage"]["backend"] == "s3":
        names += S3
    return tuple(names)


def framework(names: tuple[str, ...]) -> dict[str, str]:
    """Import ``names``; those that failed, with why (the workers import them as before).

    The settings module is hidden meanwhile, so that code which reads the settings at import fails
    here rather than load them once for every future worker."""
    hidden = os.environ.pop("DJANGO_SETTINGS_MODULE", None)
    failed = {}
    try:
        for name in names:
            try:
                importlib.import_module(name)
            except Exception as exc:  # ImproperlyConfigured, AppRegistryNotReady, ImportError
                failed[name] = f"{type(exc).__name__}: {exc}"
    finally:
        if hidden is not None:
            os.environ["DJANGO_SETTINGS_MODULE"] = hidden
    return failed


def freeze() -> None:
    """Move everything the master holds out of the collector's reach, just before a fork: a worker's
    collections then never write to (and so copy) the pages of the objects it inherits."""
    gc.collect()
    gc.freeze()
