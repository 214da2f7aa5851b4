# The bounded outbox (issue 21): each endpoint's pending count (kept exact with its rows, so that
# max_pending is held without counting them), the events dropped beyond it, and the marks that
# make the pulls of one repository and digest within a minute one event. The count starts from
# the rows already there.

from django.db import migrations, models
from django.db.models import Count


def count_pending(apps, schema_editor):  # type: ignore[no-untyped-def]
    pending_event = apps.get_model("notifications", "PendingEvent")
    endpoint_state = apps.get_model("notifications", "EndpointState")
    for row in pending_event.objects.values("endpoint").annotate(n=Count("id")):
        endpoint_state.objects.get_or_create(name=row["endpoint"])
        endpoint_state.objects.filter(name=row["endpoint"]).update(pending=row["n"])


class Migration(migrations.Migration):

    dependencies = [
        ('notifications', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='PullMark',
            fields=[
                ('key', models.CharField(max_length=64, primary_key=True, serialize=False)),
                ('at', models.DateTimeField(db_index=True)),
            ],
        ),
        migrations.AddField(
            model_name='endpointstate',
            name='dropped',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='endpointstate',
            name='pending',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.RunPython(count_pending, migrations.RunPython.noop),
    ]
