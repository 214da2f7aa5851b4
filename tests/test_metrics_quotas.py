"""/metrics gives each [[quota]] rule's usage and limit, labelled by the rule's name only."""
from __future__ import annotations

import subprocess

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.support.registry_client import push_blob
from tests.test_metrics import promtool, samples, scrape

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def quotas(settings) -> None:
    settings.REGISTRY_QUOTAS = [
        {"name": "", "repositories": "team/*", "max_bytes": "1MiB"},
        {"name": "labs", "repositories": "lab/**", "max_bytes": "2kB"},
    ]


def test_it_reports_usage_and_limit_per_rule(client: Client) -> None:
    push_blob(client, "team/secret-project", b"a" * 1000)
    push_blob(client, "team/other", b"a" * 1000)  # the same blob: counted once
    push_blob(client, "lab/x/y", b"b" * 24)
    push_blob(client, "elsewhere/app", b"c" * 5000)
    text = scrape(client)
    found = samples(text)
    assert found[("registry_quota_usage_bytes", (("rule", "team/*"),))] == 1000
    assert found[("registry_quota_limit_bytes", (("rule", "team/*"),))] == 1024 * 1024
    assert found[("registry_quota_usage_bytes", (("rule", "labs"),))] == 24
    assert found[("registry_quota_limit_bytes", (("rule", "labs"),))] == 2000
    assert "secret-project" not in text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {s.labels["rule"] for s in families["registry_quota_usage_bytes"].samples} == {"team/*", "labs"}
    result = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_without_quota_rules_there_are_no_quota_gauges(client: Client, settings) -> None:
    settings.REGISTRY_QUOTAS = []
    assert "registry_quota_" not in scrape(client)
