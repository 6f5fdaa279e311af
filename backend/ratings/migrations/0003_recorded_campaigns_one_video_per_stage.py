"""Recorded campaigns store the stimulus they really show: one whole video per stage.

Before, a recorded campaign kept the form's default of 5 screens per condition while its evaluators
watched one reference and one case video (and their ratings stored screens_seen = 2).
"""

from django.db import migrations


def one_video_per_stage(apps, schema_editor):
    Campaign = apps.get_model("ratings", "Campaign")
    Campaign.objects.filter(mode="recorded").exclude(screens_per_condition=1).update(screens_per_condition=1)


class Migration(migrations.Migration):
    dependencies = [
        ("ratings", "0002_mediadelivery"),
    ]

    operations = [
        migrations.RunPython(one_video_per_stage, migrations.RunPython.noop),
    ]
