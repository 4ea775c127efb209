"""Unchanged uploads point at their host's snapshot; snapshots carry their document's hash and the
time a report of the same layout last confirmed them; pruned raw uploads are dated."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('ingest', '0004_fabric'),
    ]

    operations = [
        migrations.AddField(
            model_name='snapshot',
            name='document_hash',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AddField(
            model_name='snapshot',
            name='confirmed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='upload',
            name='same_as',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                    related_name='confirmations', to='ingest.snapshot'),
        ),
        migrations.AddField(
            model_name='upload',
            name='raw_pruned_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
