"""manage.py backup refuses what it cannot do consistently, naming why."""
from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from registry.locks import default_locks
from registry.storage import paths

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_refuses_while_a_collection_holds_the_lock(tmp_path) -> None:
    with default_locks().hold(paths.GC_LOCK):
        with pytest.raises(CommandError, match="a garbage collection is running"):
            call_command("backup", str(tmp_path / "b"), stdout=io.StringIO())


def test_it_refuses_a_directory_that_is_not_empty(tmp_path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "old").write_text("x")
    with pytest.raises(CommandError, match="is not empty"):
        call_command("backup", str(tmp_path / "b"), stdout=io.StringIO())


def test_it_sends_s3_registries_to_their_own_tools(settings, tmp_path) -> None:
    settings.REGISTRY_STORAGE = {**settings.REGISTRY_STORAGE, "backend": "s3"}
    with pytest.raises(CommandError, match="pg_dump"):
        call_command("backup", str(tmp_path / "b"), stdout=io.StringIO())


def test_it_copies_a_registry_with_nothing_in_it(tmp_path) -> None:
    out = io.StringIO()
    call_command("backup", str(tmp_path / "b"), stdout=out)
    assert "backed up 0 blobs" in out.getvalue() and (tmp_path / "b" / "BACKUP").exists()
