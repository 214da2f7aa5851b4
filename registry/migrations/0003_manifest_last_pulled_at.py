# The pull-through cache (issue 16) reads this field too; it is added here, alone, so that either
# branch may be merged first.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('registry', '0002_upload_sessions_and_leases'),
    ]

    operations = [
        migrations.AddField(
            model_name='manifest',
            name='last_pulled_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
