"""Index operations safe on a big, live database (the loader skips modules named with "_").

On PostgreSQL every index here is built or dropped CONCURRENTLY: without the lock that would stop
pushes for as long as the build takes over millions of rows. Such statements cannot run inside a
transaction, so a migration using these operations sets ``atomic = False``. SQLite builds and drops
in place: its single writer waits for the build either way.
"""
from __future__ import annotations

from typing import Any

from django.db import models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations import AddIndex, RemoveIndex
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import ProjectState


def _on_postgres(schema_editor: BaseDatabaseSchemaEditor) -> bool:
    return schema_editor.connection.vendor == "postgresql"


def _drop_invalid(schema_editor: BaseDatabaseSchemaEditor, name: str) -> None:
    """A CONCURRENTLY build that failed (or was interrupted) leaves an invalid index behind, which
    the planner never uses and IF NOT EXISTS would keep: it goes before the next attempt."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT NOT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [name])
        row = cursor.fetchone()
    if row and row[0]:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(name)}")


class AddIndexConcurrently(AddIndex):
    """AddIndex, CONCURRENTLY on PostgreSQL."""

    def database_forwards(self, app_label: str, schema_editor: BaseDatabaseSchemaEditor,
                          from_state: ProjectState, to_state: ProjectState) -> None:
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if _on_postgres(schema_editor):
            _drop_invalid(schema_editor, self.index.name)
            schema_editor.add_index(model, self.index, concurrently=True)  # type: ignore[call-arg]
        else:
            schema_editor.add_index(model, self.index)

    def database_backwards(self, app_label: str, schema_editor: BaseDatabaseSchemaEditor,
                           from_state: ProjectState, to_state: ProjectState) -> None:
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if _on_postgres(schema_editor):
            schema_editor.remove_index(model, self.index, concurrently=True)  # type: ignore[call-arg]
        else:
            schema_editor.remove_index(model, self.index)


class RemoveIndexConcurrently(RemoveIndex):
    """RemoveIndex, CONCURRENTLY on PostgreSQL: AddIndexConcurrently the other way round."""

    def database_forwards(self, app_label: str, schema_editor: BaseDatabaseSchemaEditor,
                          from_state: ProjectState, to_state: ProjectState) -> None:
        self._adding(app_label, from_state).database_backwards(app_label, schema_editor, to_state, from_state)

    def database_backwards(self, app_label: str, schema_editor: BaseDatabaseSchemaEditor,
                           from_state: ProjectState, to_state: ProjectState) -> None:
        self._adding(app_label, to_state).database_forwards(app_label, schema_editor, from_state, to_state)

    def _adding(self, app_label: str, state: ProjectState) -> AddIndexConcurrently:
        """The operation that adds the index as ``state`` (the one holding it) defines it."""
        index = state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
        return AddIndexConcurrently(self.model_name, index)


class AddByteOrderIndex(Operation):
    """An index over ``columns`` whose last one is compared in byte order, as the registry's
    listings sort (registry.queries._sql.byte_order): PostgreSQL needs it in the "C" collation
    to read it in that order. SQLite compares text bytewise already (BINARY), so its unique
    constraints serve, and nothing is built there. Not in the models: SQLite has no "C"."""

    reversible = True

    def __init__(self, model_name: str, name: str, columns: list[str]) -> None:
        self.model_name, self.name, self.columns = model_name, name, columns

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return self.__class__.__name__, [], {"model_name": self.model_name, "name": self.name,
                                             "columns": self.columns}

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        pass

    def database_forwards(self, app_label: str, schema_editor: BaseDatabaseSchemaEditor,
                          from_state: ProjectState, to_state: ProjectState) -> None:
        if not _on_postgres(schema_editor):
            return
        model = to_state.apps.get_model(app_label, self.model_name)
        quote = schema_editor.quote_name
        *leading, last = self.columns
        columns = ", ".join([quote(c) for c in leading] + [f'{quote(last)} COLLATE "C"'])
        _drop_invalid(schema_editor, self.name)
        schema_editor.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {quote(self.name)} "
                              f"ON {quote(model._meta.db_table)} ({columns})")

    def database_backwards(self, app_label: str, schema_editor: BaseDatabaseSchemaEditor,
                           from_state: ProjectState, to_state: ProjectState) -> None:
        if _on_postgres(schema_editor):
            schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(self.name)}")

    def describe(self) -> str:
        return f"Create index {self.name} on {self.model_name} ({', '.join(self.columns)}) in byte order"


class DropColumnIndex(Operation):
    """Drop the single-column index Django made for a field (``db_index``, or a foreign key's)
    that a composite index starting with the same column covers already, or that nothing reads.
    Beside a composite unique constraint on (repository, ...) the planner picked the narrow one
    for a tiny repository's rows and then, for a big one, filtered every row; beside a wider index,
    or read by nothing, it is only one more to write. The model says ``db_index=False`` (a state
    operation beside this one)."""

    reversible = True

    def __init__(self, model_name: str, field_name: str) -> None:
        self.model_name, self.field_name = model_name, field_name

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return self.__class__.__name__, [], {"model_name": self.model_name, "field_name": self.field_name}

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        pass

    def database_forwards(self, app_label: str, schema_editor: BaseDatabaseSchemaEditor,
                          from_state: ProjectState, to_state: ProjectState) -> None:
        model = from_state.apps.get_model(app_label, self.model_name)
        column = model._meta.get_field(self.field_name).column
        concurrently = " CONCURRENTLY" if _on_postgres(schema_editor) else ""
        for name in self._indexes_on(schema_editor, model, column):
            schema_editor.execute(f"DROP INDEX{concurrently} IF EXISTS {schema_editor.quote_name(name)}")

    @staticmethod
    def _indexes_on(schema_editor: BaseDatabaseSchemaEditor, model: type[models.Model], column: str) -> list[str]:
        connection = schema_editor.connection
        with connection.cursor() as cursor:
            found = connection.introspection.get_constraints(cursor, model._meta.db_table)
        return [name for name, info in found.items()
                if info["index"] and not info["unique"] and not info["primary_key"] and info["columns"] == [column]]

    def database_backwards(self, app_label: str, schema_editor: BaseDatabaseSchemaEditor,
                           from_state: ProjectState, to_state: ProjectState) -> None:
        model = to_state.apps.get_model(app_label, self.model_name)
        field = model._meta.get_field(self.field_name)
        schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))  # type: ignore[attr-defined]

    def describe(self) -> str:
        return f"Drop the index of {self.model_name}.{self.field_name} alone"
