"""Every route of the URL conf, malformed and hostile: no 5xx, with authentication off and on, on
SQLite and PostgreSQL (``scripts/with-postgres.sh`` runs the same file).

The routes are read from the URL conf itself (``django.urls.get_resolver``), so a route added later
is fuzzed without being listed here: each pattern's path is built with Django's own reverse machinery
(``normalize``) from a sample value per URL parameter (a parameter of a new name gets a plain one).
Each route then gets every method and a set of hostile requests: NUL and lone surrogates
(``%ED%A0%80``) in path parameters, query strings, headers and bodies; huge values; bad JSON (deep
nesting, surrogate escapes); bad digests, ranges and credentials; broken percent-encoding, forms
and multipart bodies. A hypothesis property adds random text in the same places.
"""
from __future__ import annotations

import base64
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.regex_helper import normalize
from hypothesis import HealthCheck, given, settings as hypothesis_settings
from hypothesis import strategies as st

from tests.support.auth import auth_paths, basic  # noqa: F401  (fixtures)
from tests.support.registry_client import digest_of, push_image, start_upload

pytestmark = pytest.mark.django_db

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "BREW")
# Methods no route serves are refused before anything is parsed: they get the first variants only.
UNSERVED = ("OPTIONS", "BREW")
BODY_METHODS = ("POST", "PUT", "PATCH")
LAYER = b"fuzzed layer" * 64
ALICE = basic("alice", "wonderland")
ZERO = "sha256:" + "0" * 64
HOSTILE_PARAMS = ("%00", "a%00b", "%ED%A0%80", "x" * 4000, "..", "%2e%2e/%2e%2e", "A" * 300, "sha256:zz")


@dataclass(frozen=True)
class Route:
    name: str
    template: str  # "v2/%(name)s/manifests/%(reference)s"
    params: tuple[str, ...]


def _walk(resolver: URLResolver, prefix: str = "") -> Iterator[tuple[URLPattern, str]]:
    for entry in resolver.url_patterns:
        regex = entry.pattern.regex.pattern.removeprefix("^")
        if isinstance(entry, URLResolver):
            yield from _walk(entry, prefix + regex)
        else:
            yield entry, prefix + regex


def routes() -> list[Route]:
    """Every URL pattern of the project, as a path template."""
    found = []
    for pattern, regex in _walk(get_resolver()):
        for template, params in normalize(regex):
            found.append(Route(pattern.name or pattern.lookup_str, template, tuple(params)))
    return found


@dataclass(frozen=True)
class Variant:
    """One hostile request shape; ``param`` replaces every path parameter."""

    label: str
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    content_type: str = "application/octet-stream"
    param: str | None = None


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()


HEADER_VARIANTS = [
    Variant("plain"),
    Variant("query-nul", "?n=-1&last=%00&artifactType=%00&tag=%00"),
    Variant("query-surrogate", f"?mount={ZERO}&from=%ED%A0%80&digest=sha256:zz&n=1e9&artifactType=%ED%A0%80"),
    Variant("query-huge", "?q=" + "x" * 6000 + "&scope=repository:" + "a" * 300 + ":pull&n=" + "9" * 400),
    Variant("query-broken", "?%ZZ=%&a=%E0%80&%00=1&scope=&service=x&digest=" + "sha256:" + "g" * 64),
    Variant("query-scopes", "?" + "&".join(f"scope=repository:{'n' * 200}{i}:pull,push" for i in range(70))),
    Variant("ranges", headers={"Range": "bytes=9-1,a-", "Content-Range": "bytes=x-y", "If-None-Match": "\"\"",
                               "X-Request-ID": "../../" + "x" * 300}),
    Variant("header-nul", headers={"User-Agent": "agent\x00", "X-Forwarded-For": "\x00, 1.2.3.4"}),
    Variant("basic-nul", headers={"Authorization": "Basic " + _b64("ali\x00ce:wonderland")}),
    Variant("basic-surrogate", headers={"Authorization": "Basic " + _b64("alice\ud800:x")}),
    Variant("basic-broken", headers={"Authorization": "Basic %%%===", "Host": "bad host!"}),
    Variant("bearer-junk", headers={"Authorization": "Bearer a.b.c", "X-Forwarded-Proto": "gopher"}),
    Variant("bearer-huge", headers={"Authorization": "Bearer " + "x" * 9000}),
]
BODY_VARIANTS = [
    Variant("json-surrogate", body=b'{"username": "\\ud800", "password": "x", "description": "\\u0000",'
                                   b' "schemaVersion": 2, "mediaType": "\\udfff"}',
            content_type="application/json"),
    Variant("json-deep", body=b"[" * 6000, content_type="application/vnd.oci.image.manifest.v1+json"),
    Variant("json-huge-number", body=b'{"schemaVersion": ' + b"9" * 5000 + b', "ttl_days": 1e999}',
            content_type="application/json"),
    Variant("not-utf8", body=b"\xff\xfe\x00\xed\xa0\x80", content_type="application/x-www-form-urlencoded"),
    Variant("form-nul", body=b"grant_type=password&username=a%00&password=%ED%A0%80&scope=repository:x:pull"
                             b"&csrfmiddlewaretoken=%00", content_type="application/x-www-form-urlencoded"),
    Variant("multipart-junk", body=b"--b\r\nContent-Disposition: form-data; name=\"q\x00\"\r\n\r\n\xed\xa0\x80\r\n",
            content_type="multipart/form-data; boundary=b"),
    Variant("big-chunk", body=bytes(range(256)) * 600, headers={"Content-Range": "0-153599"}),
    Variant("manifest-bad-digests", body=json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "x", "digest": "sha256:../../etc", "size": -1},
        "layers": [{"mediaType": "\u0000", "digest": ZERO, "size": 10**30}],
        "subject": {"digest": "md5:x"}, "annotations": {"k\u0000": "v"}}).encode(),
        content_type="application/vnd.oci.image.manifest.v1+json"),
]
PARAM_VARIANTS = [Variant(f"param-{i}", param=value) for i, value in enumerate(HOSTILE_PARAMS)]
# Query parameters some route reads, each alone holding a NUL (together, the first one refused would
# hide the others); ``{digest}`` is the sample blob.
QUERY_KEYS = ("artifactType", "last", "n", "tag", "mount", "digest", "digest-algorithm", "scope", "service",
              "q", "sort", "account", "offline_token", "next")
KEY_VARIANTS = [Variant(f"nul-{key}", f"?{key}=a%00b") for key in QUERY_KEYS] + [
    Variant("nul-from", "?mount={digest}&from=a%00b")]
KEY_METHODS = ("GET", "POST", "PUT")


@dataclass
class Fuzzer:
    client: Client
    auth: bool
    samples: dict[str, str]
    failures: list[str] = field(default_factory=list)
    sent: int = 0

    def path(self, route: Route, param: str | None) -> str:
        values = {name: param if param is not None else self.samples.get(name, "x") for name in route.params}
        return "/" + route.template % values

    def send(self, route: Route, method: str, variant: Variant) -> None:
        headers = dict(variant.headers)
        if self.auth and "Authorization" not in headers:
            headers["Authorization"] = ALICE  # so that hostile input reaches the views, not only the 401
        extra = {"HTTP_HOST": headers.pop("Host")} if "Host" in headers else {}
        target = self.path(route, variant.param) + variant.query.replace("{digest}", self.samples["digest"])
        body = variant.body if variant.body is not None and method in BODY_METHODS else b""
        response = self.client.generic(method, target, body, variant.content_type, headers=headers, **extra)
        self.sent += 1
        # A streamed body is read to its end, which closes it as a server would (closing it by hand
        # would also close the test's database connection: Django's request_finished signal).
        content = b"".join(response.streaming_content) if response.streaming else response.content
        if response.status_code >= 500:
            self.failures.append(f"{method} {target[:120]} [{variant.label}, auth {self.auth}] -> "
                                 f"{response.status_code} {content[:200]!r}")

    def prepare(self) -> None:
        """A repository with an image and an upload session, so that the samples name real things
        (what earlier requests deleted comes back)."""
        self.client.defaults["HTTP_AUTHORIZATION"] = ALICE
        try:
            push_image(self.client, "team/app", "v1", layers=[LAYER])
            session = start_upload(self.client, "team/app")["Docker-Upload-UUID"]
        finally:
            del self.client.defaults["HTTP_AUTHORIZATION"]
        self.samples.update(reference="v1", digest=digest_of(LAYER), upload_id=session)


@pytest.fixture(params=[False, True], ids=["auth-off", "auth-on"])
def fuzzer(request, client: Client, settings, auth_paths, caplog) -> Fuzzer:  # type: ignore[no-untyped-def]
    # Thousands of refusals: their request lines (info) are not what this test reads; 5xx lines
    # (error) still show.
    caplog.set_level(logging.WARNING, logger="ops.requests")
    settings.AUTH_ENABLED = request.param
    settings.AUTH_LOGIN_FAILURES = 10**6  # wrong passwords must not throttle the right one
    settings.REGISTRY_MAX_UPLOAD_SESSIONS = 0
    fuzz = Fuzzer(client, request.param, {"name": "team/app", "rest": "x/../%00"})
    fuzz.prepare()
    return fuzz


def test_every_route_is_enumerated_from_the_url_conf() -> None:
    names = {route.name for route in routes()}
    # A sanity check of the enumeration, not a list to keep in step: new routes join on their own.
    assert {"manifest", "blob", "upload-session", "referrers", "auth-token", "tokens-create", "health",
            "repository", "unknown-endpoint", "openapi"} <= names
    assert len(routes()) >= 30


def test_no_route_answers_a_hostile_request_with_a_5xx(fuzzer: Fuzzer) -> None:
    for route in routes():
        if route.params:
            fuzzer.prepare()
        for method in METHODS:
            variants = HEADER_VARIANTS[:3] if method in UNSERVED else HEADER_VARIANTS
            for variant in variants + (BODY_VARIANTS if method in BODY_METHODS else []):
                fuzzer.send(route, method, variant)
        for variant in PARAM_VARIANTS if route.params else []:
            for method in ("GET", "PUT", "DELETE"):
                fuzzer.send(route, method, variant)
        for variant in KEY_VARIANTS:
            for method in KEY_METHODS:
                fuzzer.send(route, method, variant)
    assert fuzzer.failures == [], "\n".join(fuzzer.failures[:40])
    assert fuzzer.sent > 3000


HOSTILE_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["%00", "%ED%A0%80", "%ff", "%", "\\ud800", "..", "sha256:", ZERO, "bytes=0-", "-1", "1e999"]),
)


@hypothesis_settings(max_examples=150, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_random_text_anywhere_in_a_request_is_never_a_5xx(fuzzer: Fuzzer, data: Any) -> None:
    route = data.draw(st.sampled_from(routes()), label="route")
    method = data.draw(st.sampled_from(METHODS), label="method")
    param = data.draw(st.one_of(st.none(), HOSTILE_TEXT.map(lambda t: t.replace("/", "%2F").replace("?", "%3F"))))
    key, value = data.draw(HOSTILE_TEXT), data.draw(HOSTILE_TEXT)
    header = data.draw(st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=255), max_size=40))
    as_json = HOSTILE_TEXT.map(lambda t: json.dumps({"username": t, "description": t}).encode())
    body = data.draw(st.one_of(st.binary(max_size=200), as_json))
    variant = Variant("random", query="?" + f"{key}={value}".replace("#", "%23"),
                      headers={"Range": header, "X-Request-ID": header}, body=body,
                      content_type=data.draw(st.sampled_from(["application/json", "application/x-www-form-urlencoded",
                                                              "application/vnd.oci.image.manifest.v1+json"])),
                      param=param if param and route.params else None)
    fuzzer.send(route, method, variant)
    assert fuzzer.failures == [], fuzzer.failures
