"""WSGI entry point for gunicorn: ``gunicorn -c gunicorn.conf.py regsite.wsgi``."""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "regsite.settings")

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def one_header_per_tag(app: WSGIApp) -> WSGIApp:
    """Send ``OCI-Tag`` as one header per tag, as the spec asks.

    Django keeps one value per header name, so the manifest view joins the tags with commas (a
    character tags cannot contain) and they are split here. Only a PUT can carry the header.
    """

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "PUT":
            return app(environ, start_response)

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            expanded: list[tuple[str, str]] = []
            for name, value in headers:
                if name.lower() == "oci-tag":
                    expanded.extend((name, tag.strip()) for tag in value.split(","))
                else:
                    expanded.append((name, value))
            return start_response(status, expanded, exc_info)

        return app(environ, start)

    return wrapped


application = one_header_per_tag(get_wsgi_application())
