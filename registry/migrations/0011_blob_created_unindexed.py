# Issue 25: a blob's creation time keeps no index of its own.
#
# No statement reads blobs by created_at: the collector reads them a range of digests at a time and
# compares created_at in the rows it finds there. Yet every blob pushed wrote an entry, and the
# collector, deleting blobs in digest order, dirtied a page of the index at random for each one:
# 40% of what its blobs phase wrote at 100,000 images (184 MiB, 110 MiB without it).
#
# Not atomic: on PostgreSQL the index is dropped CONCURRENTLY (see 0007).

from django.db import migrations, models
from django.utils import timezone

from registry.migrations._operations import DropColumnIndex


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('registry', '0010_reference_digest_covering'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[DropColumnIndex('blob', 'created_at')],
            state_operations=[migrations.AlterField(model_name='blob', name='created_at',
                                                    field=models.DateTimeField(default=timezone.now))],
        ),
    ]
