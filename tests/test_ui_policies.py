"""The UI shows the governance rules: per-repository and per-quota usage, the rules that apply to a
repository, which tags are immutable (and offers no delete for them), and last-pulled times."""
from __future__ import annotations

import pytest
from django.test import Client

from tests.support.registry_client import push_blob, push_image
from tests.support.ui_fixtures import plain_static  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def rules(settings) -> None:
    settings.REGISTRY_RETENTION = [{"name": "", "repositories": "prod/*", "keep_last": 5, "keep_tags": ["^v"],
                                    "pulled_within_days": 30, "untagged_after_hours": 72}]
    settings.REGISTRY_IMMUTABLE = [{"name": "releases", "repositories": "prod/*", "tags": ["^v[0-9]"]}]
    settings.REGISTRY_QUOTAS = [{"name": "prod", "repositories": "prod/**", "max_bytes": "2KiB"}]


def test_a_repository_page_shows_its_rules_usage_immutable_tags_and_pulls(client: Client) -> None:
    push_image(client, "prod/app", "v1", layers=[b"x" * 1000])
    push_image(client, "prod/app", "latest", layers=[b"y" * 500])
    push_blob(client, "prod/other", b"z" * 100)
    client.get("/v2/prod/app/manifests/v1")

    body = client.get("/ui/r/prod/app/").content.decode()

    assert '<code>[[retention]] #1 &quot;prod/*&quot;</code>' in body
    assert "keeps the 5 most recently pushed tags" in body and "keeps tags matching ^v" in body
    assert "untagged manifests go 72 hours after their push" in body
    assert '<code>[[immutable]] #1 &quot;releases&quot;</code>' in body and "<li>^v[0-9]</li>" in body
    assert '<code>[[quota]] #1 &quot;prod&quot;</code>' in body
    configs = [b'{"architecture":"amd64","os":"linux","ref":"%s"}' % ref for ref in (b"v1", b"latest")]
    used = 1000 + 500 + 100 + sum(len(config) for config in configs)
    assert f'value="{used}"' in body and 'max="2048"' in body
    rows = body.split("<tbody>", 1)[1].split("</tbody>", 1)[0].split("</tr>")
    v1 = next(row for row in rows if ">v1</a>" in row)
    latest = next(row for row in rows if ">latest</a>" in row)
    assert ">immutable</span>" in v1 and ">immutable</span>" not in latest
    assert "Delete tag v1" not in body and "Delete tag latest" in body
    assert "prod/app holds 1 immutable tag under" in body and "Delete repository…" not in body
    assert v1.split('data-label="Last pulled">')[1].startswith("pulled <time")
    assert latest.split('data-label="Last pulled">')[1].startswith("never pulled")


def test_the_overview_lists_each_quota_with_its_usage(client: Client) -> None:
    push_blob(client, "prod/app", b"x" * 2048)
    body = client.get("/ui/").content.decode()
    assert '<code>[[quota]] #1 &quot;prod&quot;</code>' in body and "<code>prod/**</code>" in body
    assert "2.0 KiB" in body and "100%" in body and ">full</span>" in body


def test_a_manifest_page_shows_its_last_pull_and_offers_no_delete_of_an_immutable_image(client: Client) -> None:
    push_image(client, "prod/app", "v2", layers=[b"x"])
    before = client.get("/ui/r/prod/app/-/manifests/v2").content.decode()
    assert "<dt>Last pulled</dt><dd><span class=\"muted\">never</span>" in before
    assert "v2</a> (immutable)" in before and "Delete manifest" not in before
    client.get("/v2/prod/app/manifests/v2")
    after = client.get("/ui/r/prod/app/-/manifests/v2").content.decode()
    assert "<dt>Last pulled</dt><dd>" in after and "just now" in after.split("<dt>Last pulled</dt>")[1][:400]


def test_deleting_an_immutable_tag_from_the_ui_is_refused(client: Client) -> None:
    push_image(client, "prod/app", "v3", layers=[b"x"])
    response = client.post("/ui/r/prod/app/-/manifests/v3/delete")
    assert response.status_code == 403
    assert "Refused by the registry" in response.content.decode()
    assert client.get("/v2/prod/app/manifests/v3").status_code == 200


def test_a_repository_without_rules_shows_no_rules_card(client: Client) -> None:
    push_image(client, "dev/app", "v1", layers=[b"x"])
    body = client.get("/ui/r/dev/app/").content.decode()
    assert "rules-title" not in body and ">immutable</span>" not in body
