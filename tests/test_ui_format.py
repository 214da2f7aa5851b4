"""How the UI writes sizes, times and digests, and what it shows of odd or missing configs."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from django.test import Client, override_settings

from ops.ui import configs
from ops.ui.format import ago, relative, short_digest, size
from ops.ui.manifests import summarize
from registry.media_types import OCI_CONFIG
from registry.models import BlobLink
from tests.support.ui_fixtures import client_seeder, plain_static  # noqa: F401
from tests.support.ui_seed import OCI_MANIFEST

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("value, text", [
    (None, "—"), (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
    (300 * 1024, "300 KiB"), (5 * 1024**2 + 1024, "5.0 MiB"), (3 * 1024**3, "3.0 GiB"),
    (2 * 1024**5, "2.0 PiB"), (5000 * 1024**5, "5000 PiB"),
])
def test_it_writes_sizes_in_binary_units(value, text) -> None:
    assert size(value) == text


@pytest.mark.parametrize("delta, text", [
    (timedelta(seconds=-20), "just now"),
    (timedelta(minutes=-1), "1 minute ago"),
    (timedelta(minutes=-59), "59 minutes ago"),
    (timedelta(hours=-5), "5 hours ago"),
    (timedelta(days=-1), "1 day ago"),
    (timedelta(days=-45), "2 months ago"),
    (timedelta(days=-800), "2 years ago"),
    (timedelta(days=7, seconds=-3), "in 7 days"),
    (timedelta(days=30), "in 1 month"),
])
def test_it_writes_relative_times(delta, text) -> None:
    assert relative(NOW + delta, now=NOW) == text


def test_it_puts_the_exact_time_on_hover() -> None:
    html = str(ago(datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)))
    assert html.startswith('<time datetime="2026-01-02T03:04:05+00:00" title="2026-01-02 03:04:05 UTC">')


def test_it_shortens_digests_to_twelve_hex_digits() -> None:
    assert short_digest("sha256:" + "ab" * 32) == "sha256:" + "ab" * 6
    assert short_digest("weird") == "weird"


def test_it_summarizes_whatever_body_is_stored() -> None:
    broken = summarize(b"\xff not json", OCI_MANIFEST)
    assert broken.layers == [] and broken.config is None and broken.content_size == 0
    odd = summarize(json.dumps({"config": "nope", "layers": [{"digest": 5}, None]}).encode(), OCI_MANIFEST)
    assert odd.layers == [] and odd.config is None


def test_it_shows_only_what_the_api_would_accept_of_a_stored_body() -> None:
    good = {"mediaType": "l", "digest": "sha256:" + "1" * 64, "size": 10}
    odd = summarize(json.dumps({
        "config": {"mediaType": "c", "digest": "sha256:c", "size": 9},
        "layers": [good, {**good, "digest": "sha256:2"}, {**good, "size": -1}, {**good, "annotations": {"k": 1}}],
        "subject": {"mediaType": "m", "digest": "nope", "size": 1},
        "annotations": {"ok": "yes"},
    }).encode(), OCI_MANIFEST)
    assert odd.config is None and odd.subject == ""
    assert [(layer.digest, layer.size) for layer in odd.layers] == [(good["digest"], 10)]
    assert odd.annotations == {"ok": "yes"}


def test_it_reads_history_against_the_layers_it_produced() -> None:
    body = summarize(json.dumps({
        "config": {"mediaType": OCI_CONFIG, "digest": "sha256:" + "c" * 64, "size": 9},
        "layers": [{"mediaType": "l", "digest": "sha256:" + "1" * 64, "size": 10},
                   {"mediaType": "l", "digest": "sha256:" + "2" * 64, "size": 20}],
    }).encode(), OCI_MANIFEST)
    config = configs.parse_config(json.dumps({"history": [
        {"created_by": "ADD base"}, {"created_by": "ENV X=1", "empty_layer": True}, {"created_by": "COPY app"},
        {"created": "not a time", "created_by": "RUN more"},
    ]}).encode(), body.layers)
    assert [s.layer.size if s.layer else None for s in config.history] == [10, None, 20, None]
    assert config.history[3].created is None


@pytest.mark.django_db
def test_it_does_not_read_a_config_over_one_mebibyte(client: Client) -> None:
    with override_settings(AUTH_ENABLED=False):
        seeder = client_seeder(Client())
        big = b'{"architecture":"amd64","os":"linux","pad":"' + b"x" * configs.MAX_CONFIG_BYTES + b'"}'
        config = seeder.blob("team/big", big)
        doc = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
               "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config,
                          "size": len(big)}, "layers": []}
        seeder.manifest("team/big", "v1", doc, OCI_MANIFEST)
    body = client.get("/ui/r/team/big/-/manifests/v1").content.decode()
    assert "too large to show here" in body


@pytest.mark.django_db
def test_it_explains_a_config_that_is_no_longer_in_the_repository(client: Client) -> None:
    with override_settings(AUTH_ENABLED=False):
        pushed = client_seeder(Client()).image("team/app", "v1", layer_sizes=(1024,))
    BlobLink.objects.filter(blob__digest=pushed.config_digest).delete()
    response = client.get("/ui/r/team/app/-/manifests/v1")
    assert response.status_code == 200
    assert "The config blob is not in this repository." in response.content.decode()


@pytest.mark.django_db
def test_it_shows_an_error_reference_instead_of_a_stack_trace(client: Client, monkeypatch) -> None:
    from ops.ui import queries

    def broken() -> None:
        raise RuntimeError("database on fire")

    monkeypatch.setattr(queries, "overview", broken)
    response = client.get("/ui/", HTTP_X_REQUEST_ID="req-12345")
    body = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong" in body and "database on fire" not in body and "Traceback" not in body
    assert response["X-Request-ID"] in body
