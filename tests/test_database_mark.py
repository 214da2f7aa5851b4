"""`make test` runs again on PostgreSQL only the tests marked `database` (tests/support/database_mark.py):
every test that opens the test database must carry the mark, and a test that cannot open it must not."""
from __future__ import annotations

import pytest


@pytest.mark.django_db
def test_a_test_marked_django_db_is_marked_database(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("database") is not None


def test_a_test_asking_for_the_db_fixture_is_marked_database(request: pytest.FixtureRequest, db: None) -> None:
    assert request.node.get_closest_marker("database") is not None


@pytest.fixture
def repository_row(transactional_db: None) -> str:
    return "team/app"


def test_a_test_whose_fixture_needs_the_database_is_marked_database(request: pytest.FixtureRequest,
                                                                    repository_row: str) -> None:
    assert request.node.get_closest_marker("database") is not None


def test_a_test_that_cannot_open_the_database_is_not_marked(request: pytest.FixtureRequest) -> None:
    from django.db import connection

    with pytest.raises(RuntimeError, match="Database access not allowed"):
        connection.cursor()
    assert request.node.get_closest_marker("database") is None
