"""A manifest PUT with several tags answers one OCI-Tag header per tag."""
from __future__ import annotations

from typing import Any

from regsite.wsgi import one_header_per_tag


def _run(method: str, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("201 Created", headers)
        return [b""]

    def start_response(status: str, out: list[tuple[str, str]], exc_info: Any = None) -> None:
        seen.extend(out)

    one_header_per_tag(app)({"REQUEST_METHOD": method}, start_response)
    return seen


def test_it_splits_the_joined_tags_into_one_header_each() -> None:
    out = _run("PUT", [("Location", "/v2/a/manifests/x"), ("OCI-Tag", "v1, v2, latest")])
    assert [v for k, v in out if k == "OCI-Tag"] == ["v1", "v2", "latest"]
    assert ("Location", "/v2/a/manifests/x") in out


def test_it_leaves_other_methods_untouched() -> None:
    headers = [("OCI-Tag", "a, b")]
    assert _run("GET", headers) == headers
