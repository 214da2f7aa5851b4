"""Deleting a whole repository (manage.py deleterepo, services.repositories.delete_repository)."""
from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from registry.models import BlobLink, Manifest, Repository, Tag, Upload
from registry.services import gc, manifests, uploads
from registry.services.exceptions import NameInvalid, NameUnknown
from registry.services.repositories import DeletedRepository, delete_repository
from registry.storage import default_driver, paths
from tests.support.lifecycle import digest_of, has_data, push_image

pytestmark = pytest.mark.django_db

SHARED = b"base layer shared by both repositories" * 50


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _catalog(client) -> list[str]:  # type: ignore[no-untyped-def]
    return client.get("/v2/_catalog").json()["repositories"]


def test_it_deletes_a_repository_and_leaves_shared_data_to_the_collector(client) -> None:  # type: ignore[no-untyped-def]
    push_image("team/app", "v1", [SHARED, b"app v1" * 10])
    push_image("team/app", "v2", [SHARED, b"app v2" * 10])
    push_image("team/other", "latest", [SHARED])
    session = uploads.start("team/app")

    deleted = delete_repository("team/app")

    assert deleted == DeletedRepository("team/app", tags=2, manifests=2, blob_links=5, uploads=1)
    assert not Repository.objects.filter(name="team/app").exists()
    assert not Upload.objects.exists()
    assert not (default_driver().root / paths.upload_dir(session.id)).exists()
    assert _catalog(client) == ["team/other"]
    assert client.get("/v2/team/app/tags/list").status_code == 404
    assert has_data(digest_of(b"app v1" * 10))  # data stays until a collection

    result = gc.collect(gc.Options(grace=timedelta(0)))

    assert result.blobs == 4  # app v1, app v2 and both configs
    assert has_data(digest_of(SHARED))
    assert manifests.get("team/other", "latest").digest
    assert client.get(f"/v2/team/other/blobs/{digest_of(SHARED)}").status_code == 200


def test_it_drops_a_repository_from_the_catalog_once_its_last_manifest_is_gone(client) -> None:  # type: ignore[no-untyped-def]
    image = push_image("team/app", "v1", [b"layer" * 10])
    assert _catalog(client) == ["team/app"]

    manifests.delete("team/app", image, delete_enabled=True)

    assert _catalog(client) == []


def test_it_refuses_unknown_and_invalid_names() -> None:
    with pytest.raises(NameUnknown):
        delete_repository("team/nothing")
    with pytest.raises(NameInvalid):
        delete_repository("Team/App")


def test_it_deletes_from_the_command_line_without_asking_with_no_input() -> None:
    push_image("team/app", "v1", [b"layer" * 10])
    out = io.StringIO()

    call_command("deleterepo", "team/app", "--no-input", stdout=out)

    assert out.getvalue().strip() == (
        "deleted repository team/app: 1 tags, 1 manifests, 2 blob links, 0 upload sessions"
    )
    assert not Manifest.objects.exists() and not Tag.objects.exists() and not BlobLink.objects.exists()


def test_it_asks_for_the_name_again_on_a_terminal() -> None:
    push_image("team/app", "v1", [b"layer" * 10])

    with pytest.raises(CommandError, match="not confirmed"):
        call_command("deleterepo", "team/app", stdin=_Terminal("team/ap\n"), stdout=io.StringIO())
    assert Repository.objects.filter(name="team/app").exists()

    call_command("deleterepo", "team/app", stdin=_Terminal("team/app\n"), stdout=io.StringIO())
    assert not Repository.objects.filter(name="team/app").exists()


def test_it_refuses_without_a_terminal_or_with_an_unknown_name() -> None:
    with pytest.raises(CommandError, match="pass --no-input"):
        call_command("deleterepo", "team/app", stdin=io.StringIO(""), stdout=io.StringIO())
    with pytest.raises(CommandError, match="not known to registry"):
        call_command("deleterepo", "team/app", "--no-input", stdout=io.StringIO())
