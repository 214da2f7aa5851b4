"""gunicorn settings, read from the service configuration ([server] table, SVC_SERVER_* env)."""
from __future__ import annotations

from regsite import config as _config

_svc = _config.load_or_exit(serving=True)
_server = _svc["server"]

wsgi_app = "regsite.wsgi:application"
bind = [_server["bind"]]
# gthread: a slow upload holds one thread, not the whole worker, so other clients keep being served.
worker_class = "gthread"
workers = _server["workers"]
threads = _server["threads"]
# The worker heartbeat is independent of request threads in gthread, so this does not cut off a
# long upload; it only restarts a worker whose main loop is stuck.
timeout = _server["timeout"]
graceful_timeout = 30
keepalive = _server["keepalive"]
loglevel = _server["log_level"]
accesslog = None
errorlog = "-"
# Refuse oversized request lines and headers early (names are <= 255 chars, digests <= 135).
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 16384
forwarded_allow_ips = "127.0.0.1,::1"
