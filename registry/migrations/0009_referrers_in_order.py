# Issue 25: a referrers page reads one index in the order it returns.
#
# manifest_subject_idx (repository, subject_digest) found a subject's referrers but not in creation
# order; to avoid sorting them the planner preferred manifest_pushed_idx (repository, created_at,
# id) and filtered every manifest of the repository (SQLite: 212 ms for 50 signatures in a
# 100,000-tag repository). manifest_referrers_idx gives both, and serves the subject lookups the
# old index served.
#
# Not atomic: on PostgreSQL the index is built and the old one dropped CONCURRENTLY (see 0007).

from django.db import migrations, models

from registry.migrations._operations import AddIndexConcurrently, RemoveIndexConcurrently


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('registry', '0008_pushed_order_and_tallies'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='manifest',
            index=models.Index(fields=['repository', 'subject_digest', 'created_at', 'id'],
                               name='manifest_referrers_idx'),
        ),
        RemoveIndexConcurrently(model_name='manifest', name='manifest_subject_idx'),
    ]
