# A target of a cancelled job is "cancelled" (grey), not "failed" (jobs.job.lifecycle).
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0011_video_progress")]
    operations = [
        migrations.AlterField(
            model_name="target",
            name="status",
            field=models.CharField(
                choices=[("waiting", "waiting"), ("done", "done"), ("failed", "failed"), ("no_face", "no face found"),
                         ("skipped", "already done"), ("running", "processing"), ("cancelled", "cancelled")],
                default="waiting", max_length=16),
        ),
    ]
