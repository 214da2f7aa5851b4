# Issue 25: the web UI's pages cost the same at a million manifests.
#
# - Repository.pushed_at (to the minute, kept by registry.queries on every push) with an index:
#   the repositories newest first without a subquery per repository. Filled here for the existing
#   repositories, 1,000 at a time (each its own statement: no long lock).
# - manifest_pushed_idx and tag_recent_idx: a repository's newest manifests, the newest tags.
# - Tally: totals counted in the background (ops.ui.tallies) instead of on every page.
#
# Not atomic: on PostgreSQL the indexes are built CONCURRENTLY (see 0007).

from typing import Any

from django.db import migrations, models
from django.db.models import OuterRef, Subquery
from django.db.models.functions import Coalesce, Greatest

from registry.migrations._operations import AddIndexConcurrently

BATCH = 1000


def fill_pushed_at(apps: Any, schema_editor: Any) -> None:
    Repository = apps.get_model("registry", "Repository")
    Manifest = apps.get_model("registry", "Manifest")
    Tag = apps.get_model("registry", "Tag")
    manifest = Subquery(Manifest.objects.filter(repository=OuterRef("pk")).order_by("-created_at")
                        .values("created_at")[:1])
    tag = Subquery(Tag.objects.filter(repository=OuterRef("pk")).order_by("-updated_at").values("updated_at")[:1])
    last = 0
    while ids := list(Repository.objects.filter(id__gt=last).order_by("id").values_list("id", flat=True)[:BATCH]):
        Repository.objects.filter(id__in=ids, pushed_at__isnull=True).update(
            pushed_at=Greatest(Coalesce(tag, manifest), manifest))
        last = ids[-1]


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('registry', '0007_flat_at_scale'),
    ]

    operations = [
        migrations.CreateModel(
            name='Tally',
            fields=[
                ('name', models.CharField(max_length=255, primary_key=True, serialize=False)),
                ('data', models.JSONField(default=dict)),
                ('counted_at', models.DateTimeField(null=True)),
                ('counting_until', models.DateTimeField(null=True)),
            ],
        ),
        migrations.AddField(
            model_name='repository',
            name='pushed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        AddIndexConcurrently(
            model_name='manifest',
            index=models.Index(fields=['repository', 'created_at', 'id'], name='manifest_pushed_idx'),
        ),
        AddIndexConcurrently(
            model_name='tag',
            index=models.Index(fields=['updated_at', 'id'], name='tag_recent_idx'),
        ),
        migrations.RunPython(fill_pushed_at, migrations.RunPython.noop),
        AddIndexConcurrently(
            model_name='repository',
            index=models.Index(fields=['pushed_at', 'id'], name='repository_pushed_idx'),
        ),
    ]
