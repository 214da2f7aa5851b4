import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('registry', '0004_manifest_last_pulled_at'),
    ]

    operations = [
        migrations.CreateModel(
            name='QuotaUsage',
            fields=[
                ('name', models.CharField(max_length=255, primary_key=True, serialize=False)),
                ('scope', models.CharField(blank=True, default='', max_length=64)),
                ('used_bytes', models.BigIntegerField(default=0)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
    ]
