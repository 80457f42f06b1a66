# A video's frames done and in all, copied from the worker's progress record as it runs.
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0010_account")]
    operations = [
        migrations.AddField(model_name="target", name="frames_done",
                            field=models.PositiveIntegerField(blank=True, null=True)),
        migrations.AddField(model_name="target", name="frames_total",
                            field=models.PositiveIntegerField(blank=True, null=True)),
    ]
