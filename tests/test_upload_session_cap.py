"""At most [registry] max_upload_sessions live upload sessions per user (a token counts for its owner)
or, anonymous, per client address: one more is 429 TOOMANYREQUESTS with Retry-After, and nothing of
it is kept; finishing, cancelling or expiring a session frees its place."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from registry.models import Upload
from regsite import config
from tests.support.auth import auth_on, auth_paths, basic, bearer  # noqa: F401  (fixtures)
from tests.support.registry_client import digest_of, post_upload, put_upload
from tokens import services

pytestmark = pytest.mark.django_db
NAME = "team/app"


def _start(client, **extra) -> object:
    return client.post(f"/v2/{NAME}/blobs/uploads/", **extra)


def _refused(response) -> str:
    assert response.status_code == 429, response.content
    assert response["Retry-After"].isdigit()
    error = json.loads(response.content)["errors"][0]
    assert error["code"] == "TOOMANYREQUESTS"
    return error["message"]


def test_the_default_is_five_hundred_per_owner(settings) -> None:
    assert settings.REGISTRY_MAX_UPLOAD_SESSIONS == 500


def test_an_anonymous_address_gets_the_limit_and_nothing_of_the_refused_session_is_kept(client, settings) -> None:
    settings.REGISTRY_MAX_UPLOAD_SESSIONS = 3
    locations = [_start(client, REMOTE_ADDR="10.0.0.1")["Location"] for _ in range(3)]
    assert len(set(locations)) == 3
    message = _refused(_start(client, REMOTE_ADDR="10.0.0.1"))
    assert "10.0.0.1 already holds 3 upload sessions" in message and "max_upload_sessions" in message
    assert Upload.objects.count() == 3
    refused_monolithic = post_upload(client, NAME, f"?digest={digest_of(b'x')}", b"x", REMOTE_ADDR="10.0.0.1")
    _refused(refused_monolithic)
    assert Upload.objects.count() == 3
    assert _start(client, REMOTE_ADDR="10.0.0.2").status_code == 202  # another address has its own


def test_finishing_or_cancelling_a_session_frees_its_place(client, settings) -> None:
    settings.REGISTRY_MAX_UPLOAD_SESSIONS = 2
    first, second = (_start(client)["Location"] for _ in range(2))
    _refused(_start(client))
    assert put_upload(client, first, digest_of(b"data"), b"data").status_code == 201
    assert _start(client).status_code == 202
    _refused(_start(client))
    assert client.delete(second).status_code == 204
    assert _start(client).status_code == 202


def test_expired_sessions_do_not_count(client, settings) -> None:
    settings.REGISTRY_MAX_UPLOAD_SESSIONS = 2
    for _ in range(2):
        _start(client)
    _refused(_start(client))
    Upload.objects.update(updated_at=timezone.now() - timedelta(hours=settings.REGISTRY_UPLOAD_EXPIRY_HOURS + 1))
    assert _start(client).status_code == 202


def test_a_users_tokens_and_password_share_one_count(client, settings, auth_on) -> None:
    settings.REGISTRY_MAX_UPLOAD_SESSIONS = 2
    token = services.create_token("alice", "write").token
    assert _start(client, HTTP_AUTHORIZATION=basic("alice", "wonderland")).status_code == 202
    assert _start(client, HTTP_AUTHORIZATION=bearer(token)).status_code == 202
    other = services.create_token("alice", "write").token
    assert "alice already holds 2" in _refused(_start(client, HTTP_AUTHORIZATION=bearer(other)))
    _refused(_start(client, HTTP_AUTHORIZATION=basic("alice", "wonderland"), REMOTE_ADDR="10.9.9.9"))
    assert _start(client, HTTP_AUTHORIZATION=basic("bob", "builder")).status_code == 202
    assert set(Upload.objects.values_list("owner", flat=True)) == {"user:alice", "user:bob"}


def test_zero_means_no_limit(client, settings) -> None:
    settings.REGISTRY_MAX_UPLOAD_SESSIONS = 0
    assert all(_start(client).status_code == 202 for _ in range(5))


def test_mounts_need_no_session_and_are_not_refused(client, settings) -> None:
    settings.REGISTRY_MAX_UPLOAD_SESSIONS = 1
    location = _start(client)["Location"]
    assert put_upload(client, location, digest_of(b"blob"), b"blob").status_code == 201
    _start(client)
    mounted = client.post(f"/v2/team/other/blobs/uploads/?mount={digest_of(b'blob')}&from={NAME}")
    assert mounted.status_code == 201


def test_behind_a_trusted_proxy_anonymous_clients_are_told_apart(client, settings) -> None:
    settings.REGISTRY_MAX_UPLOAD_SESSIONS = 1
    settings.SERVER_TRUSTED_PROXIES = config.proxy_networks(["10.0.0.100"])
    proxy = {"REMOTE_ADDR": "10.0.0.100"}
    assert _start(client, HTTP_X_FORWARDED_FOR="203.0.113.7", **proxy).status_code == 202
    assert "203.0.113.7 already holds 1" in _refused(_start(client, HTTP_X_FORWARDED_FOR="203.0.113.7", **proxy))
    assert _start(client, HTTP_X_FORWARDED_FOR="198.51.100.4", **proxy).status_code == 202
    # From anyone but a trusted proxy, X-Forwarded-For proves nothing: the connection's address counts.
    assert _start(client, HTTP_X_FORWARDED_FOR="192.0.2.1", REMOTE_ADDR="10.0.0.5").status_code == 202
    _refused(_start(client, HTTP_X_FORWARDED_FOR="192.0.2.2", REMOTE_ADDR="10.0.0.5"))
    assert set(Upload.objects.values_list("owner", flat=True)) == {
        "address:203.0.113.7", "address:198.51.100.4", "address:10.0.0.5"}


def test_a_signed_tokens_sessions_count_for_its_user(client, settings, auth_on) -> None:
    settings.REGISTRY_MAX_UPLOAD_SESSIONS = 1
    response = client.get("/auth/token", {"scope": f"repository:{NAME}:pull,push"},
                          HTTP_AUTHORIZATION=basic("alice", "wonderland"))
    assert _start(client, HTTP_AUTHORIZATION=bearer(response.json()["token"])).status_code == 202
    assert "alice already holds 1" in _refused(_start(client, HTTP_AUTHORIZATION=basic("alice", "wonderland")))
