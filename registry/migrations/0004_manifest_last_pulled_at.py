# The pull-through cache (issue 16) reads this field too; it is added here, alone. Numbered 0004
# after the upload owner (0003) when governance was merged: no release had applied it yet.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('registry', '0003_upload_owner'),
    ]

    operations = [
        migrations.AddField(
            model_name='manifest',
            name='last_pulled_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
