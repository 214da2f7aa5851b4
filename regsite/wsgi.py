"""WSGI entry point for gunicorn: ``gunicorn -c gunicorn.conf.py regsite.wsgi``."""
from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "regsite.settings")

application = get_wsgi_application()
