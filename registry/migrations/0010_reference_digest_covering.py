# Issue 25: the collector checks a range of blobs for references from one index, read in order.
#
# It walks blobs in digest order and asks, for each, whether a manifest references it as a blob
# (leaving out, in a dry run, the manifests it would delete). The single-column digest index
# answered the digest; kind and manifest cost a read of each reference's row, at random, a page
# each once the table outgrew the cache. reference_digest_idx (digest, kind, manifest) answers all
# three, and serves every lookup by digest the old index served, which goes.
#
# Not atomic: on PostgreSQL the index is built and the old one dropped CONCURRENTLY (see 0007).

from django.db import migrations, models

from registry.migrations._operations import AddIndexConcurrently, DropColumnIndex


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('registry', '0009_referrers_in_order'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='manifestreference',
            index=models.Index(fields=['digest', 'kind', 'manifest'], name='reference_digest_idx'),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[DropColumnIndex('manifestreference', 'digest')],
            state_operations=[migrations.AlterField(model_name='manifestreference', name='digest',
                                                    field=models.CharField(max_length=200))],
        ),
    ]
