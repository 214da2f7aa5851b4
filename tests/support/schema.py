"""What the test database's schema holds, read back from it (not from the models)."""
from __future__ import annotations

from typing import Any

from django.db import connection


def indexes_on(model: type[Any], field: str) -> tuple[str, ...]:
    """The names of the indexes of ``field`` alone (PostgreSQL adds a _like twin to a text one's)."""
    column = model._meta.get_field(field).column
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, model._meta.db_table)
    names = [name for name, info in found.items() if info["columns"] == [column] and not info["primary_key"]]
    return tuple(sorted(names, key=lambda name: name.endswith("_like")))
