"""GET /metrics: Prometheus text that promtool accepts, registry gauges from shared state, bounded labels."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.support.auth import auth_on, auth_paths  # noqa: F401  (fixtures)
from tests.support.registry_client import push_blob, push_image
from tokens import services

pytestmark = pytest.mark.django_db

ALLOWED_REGISTRY_LABELS = {"version", "operation", "outcome", "event", "mechanism", "role", "rule"}


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        message = "promtool is not installed (scripts/install-test-deps.sh installs prometheus)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def scrape(client: Client) -> str:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return response.content.decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_it_passes_promtool_check_metrics(client: Client) -> None:
    push_image(client, "team/app", "v1")
    client.get("/v2/team/app/manifests/v1")
    text = scrape(client)
    result = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_it_exposes_django_http_metrics(client: Client) -> None:
    client.get("/health")
    text = scrape(client)
    assert ('django_http_responses_total_by_status_view_method_total'
            '{method="GET",status="200",view="ops:health"}') in text


def test_it_reports_blob_count_and_bytes_from_the_blob_table(client: Client) -> None:
    before = samples(scrape(client))
    assert before[("registry_storage_blobs", ())] == 0
    push_blob(client, "team/app", b"a" * 1000)
    push_blob(client, "team/app", b"b" * 24)
    push_blob(client, "other/app", b"a" * 1000)  # the same digest is stored once
    after = samples(scrape(client))
    assert after[("registry_storage_blobs", ())] == 2
    assert after[("registry_storage_bytes", ())] == 1024


def test_it_counts_live_tokens_by_role(client: Client, auth_paths) -> None:
    services.create_token("alice", "read")
    services.create_token("alice", "read")
    services.create_token("bob", "admin")
    revoked = services.create_token("bob", "write")
    services.revoke_token(None, revoked.hash_prefix)
    found = samples(scrape(client))
    assert found[("registry_active_tokens", (("role", "read"),))] == 2
    assert found[("registry_active_tokens", (("role", "write"),))] == 0
    assert found[("registry_active_tokens", (("role", "admin"),))] == 1


def test_it_never_labels_registry_metrics_by_repository_or_user(client: Client, auth_on) -> None:
    token = services.create_token("alice", "write").token
    pusher = Client(headers={"Authorization": f"Bearer {token}"})
    push_image(pusher, "team/secret-project", "v1")
    assert pusher.get("/v2/team/secret-project/manifests/v1").status_code == 200
    text = scrape(client)
    for family in text_string_to_metric_families(text):
        if family.name.startswith("registry_"):
            for sample in family.samples:
                assert set(sample.labels) <= ALLOWED_REGISTRY_LABELS, sample
    assert "secret-project" not in text
    assert "alice" not in text


def test_it_still_answers_when_the_token_directory_cannot_be_read(client: Client, settings, tmp_path) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("")
    settings.AUTH_TOKEN_STORAGE = blocker / "tokens"
    text = scrape(client)
    assert "registry_active_tokens" not in text
    assert "registry_storage_blobs" in text


def test_it_stays_open_with_auth_on(client: Client, auth_on) -> None:
    assert client.get("/metrics").status_code == 200


def test_it_refuses_post(client: Client) -> None:
    assert client.post("/metrics").status_code == 405
