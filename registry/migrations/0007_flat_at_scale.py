# Issue 25: listings and pulls whose plans stay flat at millions of rows.
#
# - tag_name_bytes and repository_name_bytes: the tags list and the catalog sort in byte order,
#   which on PostgreSQL is the "C" collation; an index in the database's default collation cannot
#   give that order, so every page sorted the whole repository (or every repository).
# - The single-column indexes of Tag/Manifest/BlobLink.repository go: the planner preferred them
#   to the composite unique constraints for the many tiny repositories, then filtered every row of
#   a big one. The unique constraints start with the same column and serve its lookups.
# - tag_pushed_idx: a repository's tags newest first, for the web UI and retention.
#
# Not atomic: on PostgreSQL each index is built and dropped CONCURRENTLY, so a big live database
# keeps serving pushes meanwhile (docs/operations.md). An interrupted build is dropped and started
# again when the migration is run again.

from typing import Any

from django.db import migrations, models

from registry.migrations._operations import AddByteOrderIndex, AddIndexConcurrently, DropColumnIndex


def _without_own_index(model_name: str, related_name: str) -> migrations.SeparateDatabaseAndState:
    field: models.ForeignKey[Any, Any] = models.ForeignKey(on_delete=models.deletion.CASCADE, related_name=related_name,
                              to='registry.repository', db_index=False)
    return migrations.SeparateDatabaseAndState(
        database_operations=[DropColumnIndex(model_name, 'repository')],
        state_operations=[migrations.AlterField(model_name=model_name, name='repository', field=field)],
    )


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('registry', '0006_tag_checked_at'),
    ]

    operations = [
        AddByteOrderIndex('tag', 'tag_name_bytes', ['repository_id', 'name']),
        AddByteOrderIndex('repository', 'repository_name_bytes', ['name']),
        AddIndexConcurrently(
            model_name='tag',
            index=models.Index(fields=['repository', 'updated_at', 'id'], name='tag_pushed_idx'),
        ),
        _without_own_index('tag', 'tags'),
        _without_own_index('manifest', 'manifests'),
        _without_own_index('bloblink', 'blob_links'),
    ]
