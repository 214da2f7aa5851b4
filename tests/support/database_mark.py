"""Which tests reach the database: `make test` runs the unit tests again on PostgreSQL, and only
these can behave differently there (``-m database``).

pytest-django refuses database access to a test that did not ask for it (the ``django_db`` mark or
one of its database fixtures), so a test that did not ask runs the same on any database and is left
out of the PostgreSQL run. The servers tests start (``tests.support.server.RegistryServer``) take a
SQLite database of their own whatever the environment says. A test whose subprocess does use the
environment's database (``SVC_DATABASE_URL`` passed through) carries ``pytest.mark.database`` by hand.
"""
from __future__ import annotations

import pytest

# pytest-django's fixtures that open the test database; a project fixture that needs one of them
# brings it into the test's fixture closure, which is what is read here.
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback",
                               "live_server", "admin_user", "admin_client", "django_user_model"})


def reaches_database(item: pytest.Item) -> bool:
    if item.get_closest_marker("django_db") or item.get_closest_marker("database"):
        return True
    return bool(DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ())))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marks
def pytest_itemcollected(item: pytest.Item) -> None:
    if reaches_database(item) and not item.get_closest_marker("database"):
        item.add_marker(pytest.mark.database)
