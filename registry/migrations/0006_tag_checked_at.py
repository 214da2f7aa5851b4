# The pull-through cache (issue 16): when the upstream last confirmed a cached tag's digest.
# Written as 0003 on its branch beside its own last_pulled_at; at the merge that column was
# governance's already (0004), so this one only adds the tag's column, after 0005.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('registry', '0005_quotausage'),
    ]

    operations = [
        migrations.AddField(
            model_name='tag',
            name='checked_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
