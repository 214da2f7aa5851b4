"""Governance rules and pull-through caches: no retention, immutable or quota rule applies under a
cache's prefix (its evict_after_days governs what it holds), a rule that lies wholly inside one is
refused at start-up, and a rule such as ``**`` still governs every other repository."""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from registry.models import Blob, BlobLink, Manifest, Tag
from registry.policies import quotas
from registry.policies.immutable import immutable_tags
from registry.policies.rules import Policies, current
from registry.services import gc
from regsite import config
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, start_upstream, stored, upstream  # noqa: F401
from tests.support.registry_client import body_of
from tests.support.upstreams import OCI_INDEX, OCI_MANIFEST, push_image

ACCEPT = {"Accept": ", ".join([OCI_MANIFEST, OCI_INDEX])}
HUB = '[[proxy]]\nprefix = "hub"\nurl = "https://registry-1.docker.io"\n'
EVERYWHERE_QUOTA = {"name": "all", "repositories": "**", "max_bytes": "100B"}
EVERYWHERE_RETENTION = {"name": "all", "repositories": "**", "keep_last": 0, "keep_tags": [],
                        "pulled_within_days": 0, "untagged_after_hours": 1}
EVERYWHERE_IMMUTABLE = {"name": "all", "repositories": "**", "tags": [".*"]}


def _refused(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(config.ConfigError) as caught:
        config.load({"SVC_CONFIG": str(path)})
    return str(caught.value)


@pytest.mark.parametrize("kind, rule", [
    ("quota", 'repositories = "hub/**"\nmax_bytes = "1GiB"\n'),
    ("retention", 'repositories = "hub/library/*"\nkeep_last = 3\n'),
    ("immutable", 'repositories = "hub"\ntags = ["^v"]\n'),
])
def test_a_rule_wholly_inside_a_cache_stops_start_up(tmp_path, kind, rule) -> None:
    message = _refused(tmp_path, HUB + f"[[{kind}]]\n{rule}")
    assert message.startswith(f"[[{kind}]] #1 ") and " repositories: " in message
    assert "lies within the pull-through cache 'hub'" in message and "evict_after_days" in message


def test_a_rule_that_reaches_past_a_cache_is_taken(tmp_path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(HUB + '[[quota]]\nrepositories = "**"\nmax_bytes = "1GiB"\n'
                          '[[retention]]\nrepositories = "hub*"\nkeep_last = 3\n')
    cfg = config.load({"SVC_CONFIG": str(path)})
    assert [rule["repositories"] for rule in cfg["quota"] + cfg["retention"]] == ["**", "hub*"]


def test_no_rule_applies_under_a_cache_prefix_and_every_rule_elsewhere() -> None:
    policies = Policies.from_config([EVERYWHERE_RETENTION], [EVERYWHERE_IMMUTABLE], [EVERYWHERE_QUOTA],
                                    exempt=["hub", "mirrors/ghcr"])
    for cached in ("hub/library/alpine", "hub", "mirrors/ghcr/owner/app"):
        assert (policies.retention_for(cached), policies.immutable_for(cached), policies.quota_for(cached)) \
            == (None, None, None)
    for own in ("hubby/app", "team/app", "mirrors/other"):
        assert policies.retention_for(own) and policies.immutable_for(own) and policies.quota_for(own)
    # Usage figures counted under other cache prefixes are counted again.
    assert policies.quota_scope != Policies.from_config([], [], [EVERYWHERE_QUOTA]).quota_scope


@pytest.mark.django_db(transaction=True)
def test_a_quota_over_everything_neither_refuses_nor_counts_what_a_cache_fetches(
        client, settings, upstream, mirror) -> None:
    mirror()
    settings.REGISTRY_QUOTAS = [EVERYWHERE_QUOTA]
    pushed = push_image(upstream.url, "library/big", "v1", layers=2)
    assert sum(len(data) for data in pushed.blobs.values()) > 100
    assert client.get("/v2/hub/library/big/manifests/v1", headers=ACCEPT).status_code == 200
    for digest, data in pushed.blobs.items():
        assert body_of(client.get(f"/v2/hub/library/big/blobs/{digest}")) == data
    stored()
    assert BlobLink.objects.filter(repository__name="hub/library/big").count() == len(pushed.blobs)
    rule = current().quotas[0]
    assert quotas.usage(rule) == 0 == quotas._count(rule, current())
    assert quotas.reconcile() == 0


@pytest.mark.django_db(transaction=True)
def test_retention_and_delete_untagged_leave_a_cache_to_its_eviction(client, settings, upstream, mirror) -> None:
    mirror(evict_after_days=30)
    settings.REGISTRY_RETENTION = [EVERYWHERE_RETENTION]
    settings.REGISTRY_IMMUTABLE = [EVERYWHERE_IMMUTABLE]
    pushed = push_image(upstream.url, "library/pinned", "v1", layers=1)
    # Pulled by digest only, as a deployment pinned by digest does: untagged here, yet in use.
    assert client.get(f"/v2/hub/library/pinned/manifests/{pushed.digest}", headers=ACCEPT).status_code == 200
    for digest in pushed.blobs:
        body_of(client.get(f"/v2/hub/library/pinned/blobs/{digest}"))
    stored()
    assert not Tag.objects.filter(repository__name="hub/library/pinned").exists()
    assert immutable_tags("hub/library/pinned", ["v1"]) == set()
    then = timezone.now() - timedelta(days=10)
    Manifest.objects.filter(repository__name="hub/library/pinned").update(created_at=then, last_pulled_at=then)
    result = gc.collect(gc.Options(grace=timedelta(0), delete_untagged=True))
    assert result.manifests == 0 and Manifest.objects.filter(digest=pushed.digest).exists()
    # Not pulled for longer than evict_after_days: eviction alone removes it, with its blobs.
    then = timezone.now() - timedelta(days=31)
    Manifest.objects.filter(repository__name="hub/library/pinned").update(created_at=then, last_pulled_at=then)
    result = gc.collect(gc.Options(grace=timedelta(0), delete_untagged=True))
    assert result.manifests == 1 and not Blob.objects.filter(digest__in=list(pushed.blobs)).exists()
