"""Registry API routes. ``name`` may hold slashes; the services check it against the OCI grammar."""
from __future__ import annotations

from django.urls import re_path

from registry import routes
from registry.views import blobs, listing, manifests, uploads

NAME = r"(?P<name>.+)"

urlpatterns = [
    re_path(r"^v2/?$", listing.base, name=routes.BASE),
    re_path(r"^v2/_catalog$", listing.catalog_list, name=routes.CATALOG),
    re_path(rf"^v2/{NAME}/tags/list$", listing.tags_list, name=routes.TAGS),
    re_path(rf"^v2/{NAME}/manifests/(?P<reference>[^/]+)$", manifests.manifest, name=routes.MANIFEST),
    re_path(rf"^v2/{NAME}/blobs/uploads/?$", uploads.upload_start, name=routes.UPLOAD_START),
    re_path(rf"^v2/{NAME}/blobs/uploads/(?P<upload_id>[^/]+)$", uploads.upload_session, name=routes.UPLOAD_SESSION),
    re_path(rf"^v2/{NAME}/blobs/(?P<digest>[^/]+)$", blobs.blob, name=routes.BLOB),
    re_path(rf"^v2/{NAME}/referrers/(?P<digest>[^/]+)$", listing.referrers_list, name=routes.REFERRERS),
    # Last: any other /v2/ path still gets the OCI error envelope, not Django's HTML 404 page.
    # (?s: so that a path holding a newline (%0A) is caught too.
    re_path(r"^v2/(?P<rest>(?s:.*))$", listing.unknown_endpoint, name=routes.UNKNOWN_ENDPOINT),
]
