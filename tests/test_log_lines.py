"""Every log line is one JSON object with time, level, logger, message and pid; a traceback stays on
its line; a line logged while a request is served names the request id; Django's request object and
its query string are never written."""
from __future__ import annotations

import json
import logging
import warnings
from datetime import datetime, timezone

import pytest
from django.conf import settings as django_settings
from django.test import Client
from pythonjsonlogger.json import JsonFormatter

from registry.services import manifests
from regsite import logs
from regsite.logs import JsonLines

pytestmark = pytest.mark.django_db


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonLines())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    @property
    def entries(self) -> list[dict]:
        assert all("\n" not in line for line in self.lines)
        return [json.loads(line) for line in self.lines]


@pytest.fixture
def lines():
    handler = Lines()
    root = logging.getLogger()
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)


def test_it_writes_the_four_fields_first_and_a_traceback_on_the_same_line() -> None:
    try:
        raise ValueError("a bug\nover two lines")
    except ValueError:
        record = logging.getLogger("registry.x").makeRecord(
            "registry.x", logging.WARNING, __file__, 1, "%s went %s", ("it", "wrong"), None)
        record.exc_info = __import__("sys").exc_info()
    line = JsonLines().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert list(entry)[:5] == ["time", "level", "logger", "message", "pid"]
    assert (entry["level"], entry["logger"], entry["message"]) == ("warning", "registry.x", "it went wrong")
    assert entry["time"].endswith("+00:00") and len(entry["time"]) == len("2025-01-01T12:00:00.125+00:00")
    assert entry["traceback"].startswith("Traceback") and "ValueError: a bug\nover two lines" in entry["traceback"]
    assert "request_id" not in entry


def test_a_line_logged_while_a_request_is_served_names_its_request_id(monkeypatch, lines) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(manifests, "get", fail)
    response = Client(raise_request_exception=False).get("/v2/team/app/manifests/v1?secret=query",
                                                         HTTP_X_REQUEST_ID="req-42")
    assert response.status_code == 500
    failures = [e for e in lines.entries if e["logger"] == "registry.errors"]
    assert len(failures) == 1
    assert failures[0]["request_id"] == "req-42" and "RuntimeError: a bug" in failures[0]["traceback"]
    # Logged once: not again by Django ("Internal Server Error: ..."), which the settings silence.
    assert [e for e in lines.entries if e["logger"] == "django.request"] == []
    assert "secret=query" not in "".join(lines.lines)
    logging.getLogger("registry.x").warning("after the request")
    assert "request_id" not in lines.entries[-1]


def test_python_warnings_are_log_lines_too(lines) -> None:
    logging.captureWarnings(True)
    try:
        warnings.warn("something is deprecated", UserWarning, stacklevel=1)
    finally:
        logging.captureWarnings(False)
    entry = lines.entries[-1]
    assert entry["logger"] == "py.warnings" and "something is deprecated" in entry["message"]


def test_django_and_the_request_log_write_through_it() -> None:
    logging_config = django_settings.LOGGING
    assert logging_config["formatters"]["json"]["()"] is JsonLines
    assert logging_config["root"]["handlers"] == ["stderr"]
    assert logging_config["loggers"]["ops.requests"]["handlers"] == ["stderr"]


@pytest.mark.parametrize("extra", [
    {},
    {"time": "2025-01-01T12:00:00.125+00:00", "request_id": "req-7", "method": "GET", "path": "/v2/a/b",
     "route": None, "status": 200, "duration_ms": 0.512, "forwarded_for": None, "principal": "ab" * 8},
    {"note": "caf\u00e9 \"quoted\"", "when": datetime(2025, 1, 1, tzinfo=timezone.utc), "_private": 1,
     "sizes": [1, 2], "level": "overridden by the caller"},
])
def test_its_quick_path_writes_what_python_json_logger_writes(monkeypatch, extra: dict) -> None:
    record = logging.getLogger("ops.requests").makeRecord(
        "ops.requests", logging.INFO, __file__, 1, "%s %s %s", ("GET", "/v2/", 200), None, extra=extra)
    formatter = JsonLines()
    serving = logs.current_request_id.set("req-ctx")
    try:
        library = JsonFormatter.format(formatter, record)  # the library's own steps, same options
        monkeypatch.setattr(JsonLines, "add_fields", None)  # the quick path must not need them
        quick = formatter.format(record)
    finally:
        logs.current_request_id.reset(serving)
    assert quick == library


def test_other_options_take_the_librarys_path() -> None:
    record = logging.getLogger("registry.x").makeRecord(
        "registry.x", logging.INFO, __file__, 1, "hello", (), None, extra={"n": 1})
    entry = json.loads(JsonLines(static_fields={"service": "registry"}).format(record))
    assert (entry["message"], entry["service"], entry["n"]) == ("hello", "registry", 1)
