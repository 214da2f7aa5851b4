"""The browse pages of the web UI: overview, repositories, repository, manifest (auth off)."""
from __future__ import annotations

import pytest
from django.test import Client

from tests.support.ui_fixtures import client_seeder, plain_static, showcase  # noqa: F401
from tests.support.ui_seed import SBOM_TYPE, Pushed

pytestmark = pytest.mark.django_db


def text(response) -> str:
    return response.content.decode()


def rows(response) -> str:
    """The page from its first table body on (past navigation and placeholders)."""
    return text(response).split("<tbody>", 1)[1]


def test_it_shows_totals_and_recent_tags_on_the_overview(client: Client, showcase: dict[str, Pushed]) -> None:
    response = client.get("/ui/")
    assert response.status_code == 200
    body = text(response)
    assert "3</span>" in body  # three repositories
    assert "team/app" in body and "latest" in body and "infra/tools" in body
    assert "MiB" in body  # 2 MiB layer in infra/tools: sizes in binary units
    assert "ago" in body or "just now" in body


def test_it_shows_how_to_push_when_the_registry_is_empty(client: Client) -> None:
    body = text(client.get("/ui/", HTTP_HOST="registry.example:4000"))
    assert "No images yet" in body
    assert "docker push registry.example:4000/team/alpine:latest" in body


def test_it_lists_repositories_with_tag_count_size_and_last_push(client: Client, showcase) -> None:
    response = client.get("/ui/repositories/")
    assert response.status_code == 200
    body = rows(response)
    assert body.index("infra/tools") < body.index("team/app") < body.index("team/multi")
    assert '<td class="num" data-label="Tags">3</td>' in body  # team/app: v1.0, v1.1, latest
    assert "2.0 MiB" in body


def test_it_searches_repositories_by_part_of_the_name(client: Client, showcase) -> None:
    body = rows(client.get("/ui/repositories/", {"q": "MULTI"}))
    assert "team/multi" in body and "team/app" not in body and "infra/tools" not in body
    empty = text(client.get("/ui/repositories/", {"q": "nothing-like-this"}))
    assert "No repository name contains" in empty


def test_it_sorts_repositories_by_last_push(client: Client, showcase) -> None:
    body = rows(client.get("/ui/repositories/", {"sort": "recent"}))
    assert body.index("infra/tools") < body.index("team/multi") < body.index("team/app")


def test_it_shows_a_repository_with_tags_digests_and_pull_commands(client: Client, showcase) -> None:
    response = client.get("/ui/r/team/app/", HTTP_HOST="registry.example:4000")
    assert response.status_code == 200
    body = text(response)
    latest = showcase["latest"]
    assert "docker pull registry.example:4000/team/app:latest" in body
    assert "docker pull registry.example:4000/team/app:v1.0" in body
    assert f'href="/ui/r/team/app/-/manifests/{latest.digest}"' in body
    assert "OCI image" in body
    assert "Cosign signature" in body and "SPDX SBOM" in body  # untagged referrers, by kind


def test_it_shows_the_platforms_and_total_size_of_an_index(client: Client, showcase) -> None:
    body = text(client.get("/ui/r/team/multi/"))
    assert "OCI index" in body
    assert "<li>linux/amd64</li>" in body and "<li>linux/arm64</li>" in body
    assert "unknown/unknown" not in body  # the attestation is no platform
    assert "in an index" in body  # the children are listed as untagged index members


def test_it_shows_an_image_manifest_with_config_layers_and_history(client: Client, showcase) -> None:
    latest = showcase["latest"]
    response = client.get(f"/ui/r/team/app/-/manifests/{latest.digest}")
    assert response.status_code == 200
    body = text(response)
    assert "linux/amd64" in body
    assert "/usr/local/bin/app" in body and "serve --port 8080" in body
    assert "org.opencontainers.image.source" in body and "8080/tcp" in body
    assert "COPY app /usr/local/bin/app" in body and "no layer" in body
    assert "300 KiB" in body and "40.0 KiB" in body
    assert "latest" in body and "v1.1" in body  # its tags


def test_it_lists_referrers_with_their_artifact_types(client: Client, showcase) -> None:
    latest, sbom = showcase["latest"], showcase["sbom"]
    body = text(client.get(f"/ui/r/team/app/-/manifests/{latest.digest}"))
    assert "Cosign signature" in body and "SPDX SBOM" in body and SBOM_TYPE in body
    assert f"/ui/r/team/app/-/manifests/{sbom.digest}" in body

    referrer = text(client.get(f"/ui/r/team/app/-/manifests/{sbom.digest}"))
    assert "Refers to" in referrer and f"/ui/r/team/app/-/manifests/{latest.digest}" in referrer
    assert "payload.json" in referrer  # the layer's title annotation


def test_it_shows_the_children_of_an_index(client: Client, showcase) -> None:
    response = client.get("/ui/r/team/multi/-/manifests/2.0")  # by tag works too
    body = text(response)
    assert response.status_code == 200
    assert "linux/amd64" in body and "linux/arm64" in body and "attestation" in body
    platforms = body.split('id="children-title"', 1)[1]
    child = platforms.split('href="/ui/r/team/multi/-/manifests/', 1)[1].split('"', 1)[0]
    child_page = text(client.get(f"/ui/r/team/multi/-/manifests/{child}"))
    assert "Part of index" in child_page


def test_it_shows_manifest_annotations_and_raw_json(client: Client, showcase) -> None:
    body = text(client.get(f"/ui/r/team/app/-/manifests/{showcase['app'].digest}"))
    assert "org.opencontainers.image.created" in body
    assert "&quot;schemaVersion&quot;: 2" in body


@pytest.mark.parametrize("path", [
    "/ui/r/no/such/repo/",
    "/ui/r/Bad..Name/",
    "/ui/r/team/app/-/manifests/sha256:" + "0" * 64,
    "/ui/r/team/app/-/manifests/sha256:nothex",
    "/ui/r/team/app/-/manifests/no-such-tag",
    "/ui/no-such-page",
])
def test_it_answers_unknown_things_with_a_helpful_404_page(client: Client, showcase, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    body = text(response)
    assert "Error 404" in body and "Traceback" not in body
    assert 'href="/ui/repositories/"' in body


def test_it_sends_headers_that_keep_pages_out_of_frames_and_caches(client: Client) -> None:
    response = client.get("/ui/")
    assert response["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
    assert response["Cache-Control"] == "no-store"


def test_it_refuses_other_methods_on_pages(client: Client) -> None:
    response = client.put("/ui/repositories/")
    assert response.status_code in (403, 405)  # CSRF refuses first without a token


@pytest.mark.parametrize("path, text", [
    ("/ui/repositories/?deleted=Call+0800+to+recover+your+images", "Call 0800"),
    ("/ui/r/team/app/?deleted=tag+v1.0%3B+visit+evil.example", "evil.example"),
    ("/ui/r/team/app/?deleted=everything", "Deleted everything"),
])
def test_it_announces_only_real_looking_deletes(client: Client, showcase, path: str, text: str) -> None:
    assert text not in client.get(path).content.decode()


def test_it_offers_the_pull_command_that_fits_the_artifact(client: Client, showcase) -> None:
    latest, sbom = showcase["latest"], showcase["sbom"]
    image = text(client.get(f"/ui/r/team/app/-/manifests/{latest.digest}"))
    assert f"docker pull testserver/team/app@{latest.digest}" in image
    artifact = text(client.get(f"/ui/r/team/app/-/manifests/{sbom.digest}"))
    assert f"oras pull testserver/team/app@{sbom.digest}" in artifact and "docker pull" not in artifact


def test_a_referrer_of_a_type_without_a_name_shows_its_type_once(client: Client, showcase) -> None:
    report = "application/vnd.example.scan-report+json"
    client_seeder(client).artifact("team/app", showcase["latest"], report, b'{"findings":[]}')
    page = text(client.get(f"/ui/r/team/app/-/manifests/{showcase['latest'].digest}"))
    referrers = page[page.index('id="referrers-title"'):]
    assert referrers.count(report) == 1, referrers
    assert referrers.count(SBOM_TYPE) == 1 and "SPDX SBOM" in referrers  # a known type: its name and its type
