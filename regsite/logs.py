"""Every log line is one JSON object: gunicorn's own (master and workers), Django's, the registry's and
the request log alike, so that one parser reads the whole stream.

Each line starts with ``time`` (UTC, milliseconds), ``level``, ``logger``, ``message`` and ``pid``, then
the ``request_id`` of the request being served when there is one, a ``traceback`` when an exception is
logged, and the fields the caller passed as ``extra`` (the request log's: ops.middleware). The encoding
is python-json-logger's; this module only chooses the fields. It imports nothing of Django, because
gunicorn's master loads it (gunicorn.conf.py) before Django is set up.
"""
from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from datetime import datetime, timezone
from functools import partial
from typing import Any

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonEncoder, JsonFormatter

# The request this thread is serving (set by ops.middleware), so that any line logged meanwhile names it.
current_request_id: ContextVar[str | None] = ContextVar("current_request_id", default=None)

# Record attributes never written: the standard ones (the four fields replace them) and Django's
# ``request``, whose text holds the query string, which the logs never show.
LEFT_OUT = (*RESERVED_ATTRS, "request", "taskName")
SEPARATORS = (",", ":")


def timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")


class JsonLines(JsonFormatter):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Every request writes a line, and python-json-logger's format spends most of its time on
        # steps these lines never use (defaults, static fields, renames of kept fields, a prefix)
        # and on making a new encoder per line. Made with the options below only, ``format`` does
        # the same in fewer steps with one encoder (which keeps no state between calls); other
        # options, and a record with an exception, a stack or a dict for its message, take the
        # library's path. tests/test_log_lines.py holds both to the same output.
        self._direct = not args and not kwargs
        kwargs.setdefault("reserved_attrs", LEFT_OUT)
        kwargs.setdefault("rename_fields", {"exc_info": "traceback"})
        kwargs.setdefault("json_serializer", partial(json.dumps, separators=SEPARATORS))
        super().__init__(*args, **kwargs)
        self._encoder = JsonEncoder(separators=SEPARATORS)  # what the options above make per line

    def format(self, record: logging.LogRecord) -> str:
        if (not self._direct or isinstance(record.msg, dict) or record.exc_info or record.exc_text
                or record.stack_info):
            return super().format(record)
        record.message = record.getMessage()
        log_data: dict[str, Any] = {}
        self._own_fields(log_data, record)
        skip = self._skip_fields
        for key, value in record.__dict__.items():  # the extras, as merge_record_extra takes them
            if key not in skip and not (isinstance(key, str) and key.startswith("_")):
                log_data[key] = value
        return self._encoder.encode(log_data)

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord,
                   message_dict: dict[str, Any]) -> None:
        self._own_fields(log_data, record)
        super().add_fields(log_data, record, message_dict)

    def _own_fields(self, log_data: dict[str, Any], record: logging.LogRecord) -> None:
        # A record may carry its own time (the request log's: when the request began).
        log_data["time"] = getattr(record, "time", None) or timestamp(record.created)
        log_data["level"] = record.levelname.lower()
        log_data["logger"] = record.name
        log_data["message"] = record.message
        log_data["pid"] = record.process  # which gunicorn worker (or the master) wrote it
        # Django logs a failed request's line (django.request) after the middleware has returned,
        # with the request itself attached.
        request_id = (getattr(record, "request_id", None) or current_request_id.get()
                      or getattr(getattr(record, "request", None), "request_id", None))
        if request_id:
            log_data["request_id"] = request_id


def config(level: str, loggers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` dictionary: the root and ``loggers`` write JSON lines to stderr.

    A logger given ``"handlers": ["stderr"]`` and ``"propagate": False`` writes its own lines at its
    own level; the others pass theirs to the root."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonLines}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json",
                                "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": loggers,
    }
