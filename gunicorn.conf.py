"""gunicorn settings, read from the service configuration ([server] table, SVC_SERVER_* env)."""
from __future__ import annotations

import logging as _logging
import os as _os
import shutil as _shutil
import tempfile as _tempfile

from gunicorn import glogging as _glogging

from regsite import config as _config
from regsite import logs as _logs
from regsite import preload as _preload
from regsite import tls as _tls
from regsite.worker import Limits as _Limits
from regsite.worker import RegistryWorker as _RegistryWorker

# Private files from the first one on: the configuration check below creates the storage root and
# the database's directory when gunicorn is started before `manage.py migrate` (which sets the same).
_os.umask(0o077)
_svc = _config.load_for_master()
_server = _svc["server"]

wsgi_app = "regsite.wsgi:application"
bind = [_server["bind"]]
# gthread whose event loop also does every wait on a slow client (regsite/worker.py): threads run
# application code only, and thousands of slow connections cost sockets, not threads.
worker_class = _RegistryWorker
_RegistryWorker.limits = _Limits(
    upload_threads=_server["upload_threads"],
    client_timeout=_server["client_timeout"],
    max_manifest_bytes=_svc["registry"]["max_manifest_bytes"],
    min_body_rate=_server["min_body_rate"],
)
# [server] tls_cert and tls_key: HTTPS on the bind address, in the worker's own loop (regsite/tls.py
# loads them, checked above; gunicorn's certfile would hand each handshake to a thread). Workers
# inherit the loaded pair and reload it when the files change; SIGHUP reloads it here too.
_RegistryWorker.certificates = _tls.loaded()
workers = _server["workers"]
threads = _server["threads"]
worker_connections = _server["connections"]
# The worker heartbeat is independent of request threads in gthread, so this does not cut off a
# long upload; it only restarts a worker whose main loop is stuck.
timeout = _server["timeout"]
graceful_timeout = 30
keepalive = _server["keepalive"]
loglevel = _server["log_level"]
accesslog = None
errorlog = "-"
# gunicorn's own lines (start, workers, signals, the auth-off warning, tracebacks) are JSON like the
# application's (regsite.logs); the request log (ops.middleware) is the access log.
logconfig_dict = _logs.config(loglevel, {
    "gunicorn.error": {"handlers": ["stderr"], "level": loglevel.upper(), "propagate": False},
})
_logging.captureWarnings(True)  # Python's warnings too (Django does the same in the workers)


class _Logger(_glogging.Logger):
    """gunicorn's logger, whose access log stays off unless --access-logfile asks for it: a
    logconfig_dict turns it on, and it would build its fields for every request only to drop them."""

    def _compute_access_log_enabled(self) -> bool:
        return self.cfg.accesslog is not None


logger_class = _Logger
# Refuse oversized request lines and headers early (names are <= 255 chars, digests <= 135).
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 16384
# gunicorn believes no forwarding header from anyone: with its defaults, a SCRIPT_NAME header from
# loopback rewrote the path Django routes on, and X-Forwarded-Proto made any local caller "https".
# regsite/forwarded.py reads X-Forwarded-For and X-Forwarded-Proto from [server] trusted_proxies.
forwarded_allow_ips = ""
forwarder_headers = ""
secure_scheme_headers: dict[str, str] = {}
# gunicorn 27's control socket (for gunicornc) is one path per user and host: two instances on one
# host removed each other's, and in the container its directory is not writable. Nothing here uses it.
control_socket_disable = True


def post_worker_init(worker: object) -> None:
    # [gc] interval_hours: every worker polls; a lock in the storage root lets one collect per interval.
    from notifications import sender
    from registry import scheduler
    from replication import feed

    scheduler.start()
    # [[notifications]]: every worker tries for the sender's lock; its holder delivers the outbox.
    sender.start()
    # [[replication]]: every worker tries for each policy's lock; its holder runs the policy. The
    # runner, and the HTTP client it brings (urllib3), are loaded only where policies are configured.
    if feed.configured():
        from replication import runner

        runner.start()


# Prometheus multiprocess mode: each worker writes its metrics to files in this directory and a
# scrape of /metrics sums them, so any worker reports the whole service. prometheus_client reads
# the variable when it is first imported, which happens in the workers after this file has run.
_METRICS_DIR_PREFIX = "svc-registry-metrics-"
if "PROMETHEUS_MULTIPROC_DIR" not in _os.environ:
    _os.environ["PROMETHEUS_MULTIPROC_DIR"] = _tempfile.mkdtemp(prefix=_METRICS_DIR_PREFIX)


# Django and the libraries are imported here, once, and shared by the workers forked from this
# process (regsite/preload.py); each worker still builds its settings from the configuration read
# above (regsite.config.load_for_master), which SIGHUP reads again.
_not_preloaded = _preload.framework(_preload.modules_for(_svc))


def pre_fork(server: object, worker: object) -> None:
    _preload.freeze()


def on_starting(server: object) -> None:
    try:
        _config.exit_if_in_use(server.cfg.address)  # type: ignore[attr-defined]
    except SystemExit:
        on_exit(server)  # gunicorn runs no on_exit for a stop in on_starting: the directory would stay
        raise
    # Files left by an earlier run would add its counts to this one's.
    directory = _os.environ["PROMETHEUS_MULTIPROC_DIR"]
    _os.makedirs(directory, exist_ok=True)
    for name in _os.listdir(directory):
        if name.endswith(".db"):
            _os.unlink(_os.path.join(directory, name))


def when_ready(server: object) -> None:
    for name, why in _not_preloaded.items():
        server.log.warning("%s is not shared by the workers (each imports it): %s", name, why)  # type: ignore[attr-defined]
    certificates = _tls.loaded()
    if certificates is not None:
        server.log.info("serving HTTPS with the certificate in %s", certificates.cert)  # type: ignore[attr-defined]
        for warning in certificates.warnings:
            server.log.warning("%s", warning)  # type: ignore[attr-defined]
    # With authentication off, anyone who reaches the port may push and delete.
    if not _svc["auth"]["enabled"] and not _config.loopback_only(_server["bind"]):
        server.log.warning(  # type: ignore[attr-defined]
            "authentication is off and the registry listens on %s: anyone who can reach it may push "
            "and delete images (set [auth] enabled = true, or bind to 127.0.0.1)", _server["bind"])
    # Groups that [[access]] rules name and no source defines grant no one: a mistake to point out,
    # not to refuse (the groups file is re-read while the server runs, and may gain them).
    from regsite.access_config import undefined_groups

    for line in undefined_groups(_svc):
        server.log.warning("%s", line)  # type: ignore[attr-defined]


def child_exit(server: object, worker: object) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]


def on_exit(server: object) -> None:
    # Remove the directory only when it is the temporary one made above (a SIGHUP reload runs
    # this file again, so "made above" is told by its name, not by a variable).
    directory = _os.environ["PROMETHEUS_MULTIPROC_DIR"]
    if _os.path.basename(directory).startswith(_METRICS_DIR_PREFIX):
        _shutil.rmtree(directory, ignore_errors=True)
