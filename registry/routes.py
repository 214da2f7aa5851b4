"""The names of the registry's URL routes: registry/urls.py names its patterns with these, and
authentication (which action a route needs) and metrics (what a request counts as) look them up
with the same constants, so a renamed route cannot silently drop out of either."""
from __future__ import annotations

BASE = "base"
CATALOG = "catalog"
TAGS = "tags"
MANIFEST = "manifest"
UPLOAD_START = "upload-start"
UPLOAD_SESSION = "upload-session"
BLOB = "blob"
REFERRERS = "referrers"
UNKNOWN_ENDPOINT = "unknown-endpoint"
